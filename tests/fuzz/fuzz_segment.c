/*
 * fuzz_segment.c - libFuzzer target: the segment opener and every call on
 * a segment whose bytes are the fuzzer's input, written as they are (no
 * normalising: header, table, mutex words, undo records) to
 * /dev/shm/srl-fuzz-<pid>.
 *
 * The seed corpus (corpus/segment/) holds valid small segments made by
 * make_seed (run.sh builds and runs it); the fuzzer mutates their bytes.
 *
 * Per input: srl_open_shared with cfg NULL (adopting the segment's own
 * policy and geometry); if that succeeds, it is closed and reopened with a
 * cfg naming what the first open adopted and lock_timeout_ms = 2, so a
 * mutated lock word that looks held costs milliseconds, not a second (a
 * mutated mutex may legitimately block: that is SRL_ETIMEDOUT, not a
 * hang); the fuzz build shortens the opener's wait for a creator the same
 * way (SRL__SHM_READY_WAIT_MS, run.sh).  Then acquire, peek, enter/leave,
 * key_state, reset_key on a few keys, foreach, evict_idle, stats, info,
 * check.  Any return code is acceptable; a crash, a sanitizer report, a
 * leak or a hang (libFuzzer -timeout) is a finding.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srl.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int visit(const srl_entry *e, void *ctx)
{
    (void)ctx;
    volatile unsigned char sink = 0;
    for (uint32_t i = 0; i < e->display_len; i++)
        sink ^= e->display[i];
    (void)sink;
    return 0;
}

static void report(void *ctx, const char *problem)
{
    (void)ctx;
    (void)strlen(problem);
}

static void every_call(srl_limiter *lim)
{
    static const char *keys[] = {"a", "b", "key-1", "key-2", "192.0.2.1"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        srl_decision d;
        srl_acquire(lim, keys[i], strlen(keys[i]), 1, &d);
        srl_peek(lim, keys[i], strlen(keys[i]), 1, &d);
    }
    /* In-flight units (SRL_ENOTSUP without a concurrency limit), and the
     * raw state copy the tools read. */
    srl_lease l;
    srl_decision d;
    if (srl_enter(lim, "key-1", 5, &l, &d) == 0 && d.allowed)
        srl_leave(lim, &l);
    unsigned char state[1 << 16];
    srl_key_state(lim, "b", 1, state, sizeof state);
    srl_reset_key(lim, "a", 1);
    srl_foreach(lim, visit, NULL);
    srl_evict_idle(lim);
    srl_stats st;
    srl_stats_get(lim, &st);
    srl_info info;
    srl_info_get(lim, &info);
    srl_check(lim, report, NULL);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char name[64], path[80];
    snprintf(name, sizeof name, "/srl-fuzz-%d", (int)getpid());
    snprintf(path, sizeof path, "/dev/shm%s", name);
    unlink(path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        abort();
    if (write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);

    srl_limiter *lim = NULL;
    if (srl_open_shared(name, NULL, 0, &lim) == 0) {
        srl_info info;
        srl_config cfg;
        srl_config_init(&cfg);
        if (srl_info_get(lim, &info) == 0) {
            cfg.limits = info.limits;   /* every limit: a compound reopens as itself */
            cfg.capacity = info.capacity;
            cfg.key_display = info.key_display;
        }
        srl_close(lim);
        cfg.lock_timeout_ms = 2;
        lim = NULL;
        if (srl_open_shared(name, &cfg, 0, &lim) == 0) {
            every_call(lim);
            srl_close(lim);
        }
    }
    unlink(path);
    return 0;
}
