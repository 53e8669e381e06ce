/*
 * rlctl_watch.c - watch: live rates of a segment, like top or varnishstat.
 *
 * The first row comes at once (the totals; no rates yet), then one every
 * interval (-i SECONDS, default 1): wall-clock time (HH:MM:SS, .mmm added
 * when the interval is not whole seconds), keys tracked, the
 * per-second rates of allowed, denied, full and evicted decisions since
 * the previous row, and the running totals (allowed, denied, full,
 * evicted, reset slots, recovered, timeouts).  -n COUNT stops after COUNT
 * rows, the first included; otherwise it runs until interrupted.  --json
 * prints one object per row (JSON Lines); the first has t_ns 0 (t_ns:
 * monotonic time since the first row), interval_ns 0 and null rates.
 *
 * On a terminal (stdout a tty, no --json) it redraws the screen like top:
 * the alternate screen, a title, the header and the latest rows that fit.
 * SIGINT/SIGTERM/SIGHUP end the loop at once (the sleep is interrupted)
 * and the terminal is restored (normal screen, cursor shown) before rlctl
 * exits 0.  The signal handler only sets a flag: the one piece of global
 * state in rlctl, which a signal handler cannot do without.  Not a tty:
 * plain lines, the header once.
 *
 * Destroy + create under the same name: each row it compares the inode of
 * /dev/shm/NAME with the one it opened; when it changed it opens the name
 * again, says so in one line ("NAME was recreated ...") and goes on with
 * the new segment's counters (and its policy in the title), instead of
 * showing the orphan's frozen ones.
 * While the name is missing each row says "(removed)".
 *
 * Rates are deltas over the measured elapsed CLOCK_MONOTONIC time, not the
 * nominal interval, so a late wakeup does not inflate them.  Samples are
 * scheduled on absolute deadlines, so the interval does not drift.  A
 * counter that went down (it never should) gives a rate of 0, not a wrap.
 * srl_stats sums per-bucket counters one bucket at a time: workers are
 * never stopped, and no counter is added to their hot path.
 */
#include "rlctl.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static uint64_t mono_ns(void)
{
    return srl_monotonic_ns(NULL);
}

/* 0 at the deadline, -1 if a stop was asked for while sleeping. */
static int sleep_until(uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};
    while (!stop_requested) {
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == 0)
            return 0;
    }
    return -1;
}

/* Events per second, in thousandths, over elapsed_ns. */
static uint64_t rate_milli(uint64_t now, uint64_t before, uint64_t elapsed_ns)
{
    if (now <= before || elapsed_ns == 0)
        return 0;
    unsigned __int128 v = (unsigned __int128)(now - before) * 1000000000000ull / elapsed_ns;
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static uint64_t unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* HH:MM:SS, with .mmm when ms (an interval that is not whole seconds:
 * at -i 0.5 two rows would otherwise share a stamp). */
static const char *clock_text(uint64_t ns, int ms, char *buf, size_t len)
{
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL || strftime(buf, len, "%H:%M:%S", &tm) == 0)
        snprintf(buf, len, "?");
    else if (ms)
        snprintf(buf + strlen(buf), len - strlen(buf), ".%03u",
                 (unsigned)(ns / 1000000ull % 1000));
    return buf;
}

/* One row's figures; elapsed 0: the first row, no rates. */
struct row {
    uint64_t t_ns, wall_ns, elapsed;
    srl_stats cur, prev;
    int removed;
    int ms;                   /* TIME with milliseconds (TIME_W_MS wide) */
};

static void row_json(const char *name, const struct row *r)
{
    const srl_stats *c = &r->cur, *p = &r->prev;
    rlctl_json j;
    rlctl_json_init(&j, stdout);
    rlctl_json_begin_obj(&j, NULL);
    rlctl_json_str(&j, "name", name);
    rlctl_json_u64(&j, "t_ns", r->t_ns);
    rlctl_json_u64(&j, "unix_ns", r->wall_ns);
    rlctl_json_u64(&j, "interval_ns", r->elapsed);
    rlctl_json_bool(&j, "removed", r->removed);
    rlctl_json_u64(&j, "used", c->used);
    rlctl_json_u64(&j, "capacity", c->capacity);
    static const char *const names[] = {"allowed_per_s", "denied_per_s", "full_per_s",
                                        "evicted_per_s"};
    const uint64_t now[] = {c->allowed, c->denied, c->full, c->evicted};
    const uint64_t before[] = {p->allowed, p->denied, p->full, p->evicted};
    for (int i = 0; i < 4; i++) {
        if (r->elapsed == 0)
            rlctl_json_null(&j, names[i]);
        else
            rlctl_json_milli(&j, names[i], rate_milli(now[i], before[i], r->elapsed));
    }
    rlctl_json_u64(&j, "allowed", c->allowed);
    rlctl_json_u64(&j, "denied", c->denied);
    rlctl_json_u64(&j, "full", c->full);
    rlctl_json_u64(&j, "evicted", c->evicted);
    rlctl_json_u64(&j, "recovered", c->recovered);
    rlctl_json_u64(&j, "reset_slots", c->reset_slots);
    rlctl_json_u64(&j, "timeouts", c->timeouts);
    rlctl_json_end_obj(&j);
    rlctl_json_end(&j);
}

static const char *rate_text(const struct row *r, uint64_t now, uint64_t before, char *buf,
                             size_t len)
{
    if (r->elapsed == 0)
        return "-";
    uint64_t milli = rate_milli(now, before, r->elapsed);
    snprintf(buf, len, "%" PRIu64 ".%" PRIu64, milli / 1000, milli / 100 % 10);
    return buf;
}

#define HEADER_FMT "%*s %10s %10s %10s %8s %9s %12s %12s %9s %9s %7s %9s %8s"
#define TIME_W 8              /* HH:MM:SS */
#define TIME_W_MS 12          /* HH:MM:SS.mmm */

static void header_text(int ms, char *buf, size_t len)
{
    snprintf(buf, len, HEADER_FMT, ms ? TIME_W_MS : TIME_W, "TIME", "USED", "ALLOWED/s",
             "DENIED/s", "FULL/s", "EVICTED/s", "ALLOWED", "DENIED", "FULL", "EVICTED", "RESET",
             "RECOVERED", "TIMEOUTS");
}

static void row_text(const struct row *r, char *buf, size_t len)
{
    const srl_stats *c = &r->cur, *p = &r->prev;
    char t[24], used[24], a[32], d[32], f[32], e[32], n[7][24];
    const uint64_t tot[7] = {c->allowed, c->denied,    c->full,    c->evicted,
                             c->reset_slots, c->recovered, c->timeouts};
    for (int i = 0; i < 7; i++)
        snprintf(n[i], sizeof n[i], "%" PRIu64, tot[i]);
    snprintf(used, sizeof used, "%" PRIu64, c->used);
    if (snprintf(buf, len, HEADER_FMT "%s", r->ms ? TIME_W_MS : TIME_W,
                 clock_text(r->wall_ns, r->ms, t, sizeof t), used,
             rate_text(r, c->allowed, p->allowed, a, sizeof a),
             rate_text(r, c->denied, p->denied, d, sizeof d),
             rate_text(r, c->full, p->full, f, sizeof f),
             rate_text(r, c->evicted, p->evicted, e, sizeof e), n[0], n[1], n[2], n[3], n[4],
             n[5], n[6], r->removed ? "  (removed)" : "") < 0)
        buf[0] = '\0';
}

/* The rows kept for the full-screen view: a ring of the latest ones. */
#define KEEP 200
struct screen {
    int tty;
    char lines[KEEP][320];
    size_t n, next;
};

static void screen_add(struct screen *s, const char *line)
{
    snprintf(s->lines[s->next], sizeof s->lines[0], "%s", line);
    s->next = (s->next + 1) % KEEP;
    if (s->n < KEEP)
        s->n++;
}

static void screen_draw(const struct screen *s, const char *title, int ms)
{
    struct winsize ws;
    size_t rows = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 3 ? ws.ws_row : 24;
    size_t fit = rows - 3, show = s->n < fit ? s->n : fit;
    char hdr[320];
    header_text(ms, hdr, sizeof hdr);
    printf("\033[H\033[2J%s\n\n%s\n", title, hdr);
    for (size_t i = 0; i < show; i++) {
        size_t at = (s->next + KEEP - show + i) % KEEP;
        printf("%s%s", s->lines[at], i + 1 < show ? "\n" : "");
    }
}

static void emit(struct screen *s, const char *title, int ms, const char *line)
{
    if (s->tty) {
        screen_add(s, line);
        screen_draw(s, title, ms);
    } else {
        printf("%s\n", line);
    }
}

/* The inode at /dev/shm/NAME, 0 if there is none. */
static uint64_t name_inode(const char *name)
{
    char path[300];
    struct stat st;
    snprintf(path, sizeof path, RLCTL_SHM_DIR "/%s", name[0] == '/' ? name + 1 : name);
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* "rlctl watch NAME: POLICY, N slots, every I (Ctrl-C quits)" of the
 * segment in *in (made again when the name is recreated). */
static void make_title(char *title, size_t len, const rlctl_opts *o, const srl_info *in)
{
    char pol[SRL_LIMITS_TEXT_MAX], ivl[48];
    if (srl_limits_format(&in->limits, pol, sizeof pol) < 0)
        snprintf(pol, sizeof pol, "?");
    snprintf(title, len, "rlctl watch %s: %s, %" PRIu64 " slots, every %s (Ctrl-C quits)",
             rlctl_seg_name(in, o->name), pol, in->capacity,
             rlctl_fmt_duration(o->interval_ns, ivl, sizeof ivl));
}

int rlctl_cmd_watch(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    uint64_t ino = name_inode(o->name);
    srl_info info;
    memset(&info, 0, sizeof info);   /* the title's, if srl_info_get fails */
    int rc = srl_info_get(lim, &info);
    char title[400], line[320];
    struct screen *scr = calloc(1, sizeof *scr);
    if (scr == NULL) {
        srl_close(lim);
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    scr->tty = !o->json && isatty(STDOUT_FILENO);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: the sleep returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    make_title(title, sizeof title, o, &info);
    struct row r = {.ms = o->interval_ns % 1000000000ull != 0};
    if (scr->tty) {
        fputs("\033[?1049h\033[?25l", stdout); /* alternate screen, cursor hidden */
    } else if (!o->json) {
        header_text(r.ms, line, sizeof line);
        printf("%s\n", line);
    }
    if (rc == 0)
        rc = srl_stats_get(lim, &r.cur);
    uint64_t start = mono_ns(), last = start, deadline = start;   /* t_ns 0: the first row */
    int restarted = 0;
    for (uint64_t i = 0; rc == 0 && status == EX_OK && (o->count == 0 || i < o->count); i++) {
        if (i > 0) {
            deadline += o->interval_ns;
            if (sleep_until(deadline) != 0)
                break;
            r.prev = r.cur;
            uint64_t now_ino = name_inode(o->name);
            r.removed = now_ino == 0;
            if (now_ino != 0 && now_ino != ino) {
                srl_limiter *fresh = NULL;
                srl_info fi;
                srl_config cfg;
                rlctl_open_config(&cfg);
                if (srl_open_shared(o->name, &cfg, SRL_ADOPT, &fresh) == 0 &&
                    srl_info_get(fresh, &fi) == 0) {
                    srl_close(lim);
                    lim = fresh;
                    ino = now_ino;
                    make_title(title, sizeof title, o, &fi);   /* its policy, not the old one */
                    char when[48];
                    time_t ct = (time_t)(fi.created_unix_ns / 1000000000ull);
                    struct tm tm;
                    if (localtime_r(&ct, &tm) == NULL ||
                        strftime(when, sizeof when, "%H:%M:%S", &tm) == 0)
                        snprintf(when, sizeof when, "?");
                    snprintf(line, sizeof line,
                             "%s was recreated (a new segment, created %s): its counters follow",
                             o->name, when);
                    emit(scr, title, r.ms, line);
                    restarted = 1; /* no rates across two segments */
                } else if (fresh != NULL) {
                    srl_close(fresh);
                }
            }
            rc = srl_stats_get(lim, &r.cur);
            if (rc != 0)
                break;
        }
        uint64_t now = i == 0 ? start : mono_ns();
        r.t_ns = now - start;
        r.wall_ns = unix_ns();
        r.elapsed = i == 0 || restarted ? 0 : now - last;
        restarted = 0;
        if (o->json) {
            row_json(o->name, &r);
        } else {
            row_text(&r, line, sizeof line);
            emit(scr, title, r.ms, line);
        }
        status = rlctl_flush(EX_OK);
        last = now;
    }
    if (scr->tty) {
        fputs("\033[?25h\033[?1049l", stdout); /* cursor shown, normal screen */
        status = rlctl_flush(status);
    }
    free(scr);
    srl_close(lim);
    return rc != 0 ? rlctl_fail_cmd(o, rc) : status;
}
