/*
 * rlctl_progress.c - a progress line on stderr while a long walk runs.
 *
 * info, ls --keys, list, evict and check walk every bucket of a segment
 * (srl_stats_get, srl_foreach, srl_evict_idle, srl_check): about 2 s at 10M
 * slots, far more for a full list.  On a terminal the operator should see
 * that rlctl is working, and how far it is; a script must see nothing.  So:
 *   - drawn only when stderr is a tty and --json was not given;
 *   - one line, rewritten in place: "\r<text>\033[K", cut to the terminal's
 *     width (a wrapped line could not be rewritten by "\r");
 *   - first drawn after RLCTL_PROGRESS_DELAY seconds (default 0.5; "0"
 *     draws at once, from begin itself), so a quick walk never flickers;
 *     then redrawn every 0.2 s;
 *   - erased ("\r\033[K") by end, so what follows starts on a clean line.
 *
 * The walks are library calls that do not return until done, so the line
 * is drawn by a thread of its own.  The walker reports only a count
 * (rlctl_progress_add, one relaxed atomic add: srl_foreach's callback
 * may run 10M times); for walks that report nothing (srl_stats_get,
 * srl_evict_idle, srl_check) the line shows the elapsed time only.
 *
 * Lock rules: mu guards stop and drawn; the drawing thread holds it while
 * it writes, so end's erase can never be followed by a late draw.  The
 * thread touches nothing but this struct and stderr (write(2), one call
 * per line).  rlctl is otherwise single-threaded; no srl call is made
 * here.
 */
#include "rlctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define TICK_NS 200000000ull           /* redraw every 0.2 s */
#define DEFAULT_DELAY_NS 500000000ull  /* first draw after 0.5 s */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* RLCTL_PROGRESS_DELAY: "0", or seconds as -i takes them (0.001..86400);
 * anything else is the default (a typo must not turn progress off). */
static uint64_t delay_ns(void)
{
    const char *s = getenv("RLCTL_PROGRESS_DELAY");
    uint64_t ns;
    if (s == NULL)
        return DEFAULT_DELAY_NS;
    if (strcmp(s, "0") == 0)
        return 0;
    return rlctl_parse_seconds(s, &ns) == 0 ? ns : DEFAULT_DELAY_NS;
}

/* Columns of the terminal on stderr, less one (a line that fills the last
 * column wraps on some terminals); 79 when unknown. */
static size_t width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
        return (size_t)ws.ws_col - 1;
    return 79;
}

/* Write the current line; called with mu held. */
static void draw(rlctl_progress *p)
{
    uint64_t el = (mono_ns() - p->start_ns) / 100000000ull; /* tenths of a second */
    uint64_t done = atomic_load_explicit(&p->done, memory_order_relaxed);
    char text[512], line[600];
    if (p->unit == NULL)
        snprintf(text, sizeof text, "%s, %" PRIu64 ".%" PRIu64 "s", p->what, el / 10, el % 10);
    else if (p->total != 0) {
        uint64_t pct =
            done >= p->total ? 100 : (uint64_t)((unsigned __int128)done * 100 / p->total);
        snprintf(text, sizeof text, "%s: %" PRIu64 " of %" PRIu64 " %s (%" PRIu64 " %%), %" PRIu64
                 ".%" PRIu64 "s", p->what, done, p->total,
                 rlctl_plural(p->total, p->unit_one, p->unit), pct, el / 10, el % 10);
    } else
        snprintf(text, sizeof text, "%s: %" PRIu64 " %s, %" PRIu64 ".%" PRIu64 "s", p->what, done,
                 rlctl_plural(done, p->unit_one, p->unit), el / 10, el % 10);
    size_t w = width(), n = strlen(text);
    if (n > w)
        n = w;
    int len = snprintf(line, sizeof line, "\r%.*s\033[K", (int)n, text);
    if (len > 0 && write(STDERR_FILENO, line, (size_t)len) < 0) {
        /* nothing to do: progress is a courtesy */
    }
    p->drawn = 1;
}

static void *run(void *arg)
{
    rlctl_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    uint64_t next = p->start_ns + p->delay_ns;
    if (p->drawn) /* drawn at once by begin */
        next += TICK_NS;
    while (!p->stop) {
        struct timespec ts = {.tv_sec = (time_t)(next / 1000000000ull),
                              .tv_nsec = (long)(next % 1000000000ull)};
        int rc = pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->stop)
            break;
        if (rc == ETIMEDOUT || mono_ns() >= next) {
            draw(p);
            next = mono_ns() + TICK_NS;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void rlctl_progress_begin(rlctl_progress *p, const rlctl_opts *o, const char *unit_one,
                          const char *unit, uint64_t total, const char *fmt, ...)
{
    memset(p, 0, sizeof *p);
    atomic_init(&p->done, 0);
    if (o->json || !isatty(STDERR_FILENO))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->what, sizeof p->what, fmt, ap);
    va_end(ap);
    /* Keys are shown escaped everywhere; a segment name is checked by
     * srl_name_check, so what holds printable ASCII only. */
    p->unit_one = unit_one;
    p->unit = unit;
    p->total = total;
    p->delay_ns = delay_ns();
    p->start_ns = mono_ns();
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return;
    int ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&p->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok)
        return;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        return;
    }
    if (p->delay_ns == 0)
        draw(p); /* before the walk starts: the first line is never missed */
    if (pthread_create(&p->thread, NULL, run, p) != 0) {
        if (p->drawn && write(STDERR_FILENO, "\r\033[K", 4) < 0) {
            /* courtesy only */
        }
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        return;
    }
    p->on = 1;
}

void rlctl_progress_end(rlctl_progress *p)
{
    if (!p->on)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    if (p->drawn && write(STDERR_FILENO, "\r\033[K", 4) < 0) {
        /* courtesy only */
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    p->on = 0;
}
