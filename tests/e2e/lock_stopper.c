/*
 * lock_stopper.c - an e2e helper: a process that stops while it holds a
 * key's bucket lock on a real segment, so that the servers sharing the
 * segment see a stuck lock (degraded decisions) for as long as the test
 * keeps it stopped.
 *
 *     lock_stopper NAME SPEC KEY
 *
 * Opens segment NAME (existing; SPEC as the server declared it: same
 * capacity and key_display) with a ticker that raises SIGSTOP when read,
 * armed just before srl_acquire(KEY): srl reads the ticker inside the key's
 * bucket lock, so the process stops holding it.  The test sees the stop
 * (waitpid WUNTRACED or /proc state T), then SIGCONTs it: the ticker
 * returns, the acquire finishes and unlocks, and the helper exits 0 (1 on
 * a usage or open error, with the reason on stderr).  Only srl's public
 * API: what any process on the host could do.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "srl.h"

static volatile sig_atomic_t armed;

static uint64_t stop_ticker(void *ctx)
{
    (void) ctx;
    if (armed) {
        armed = 0;
        raise(SIGSTOP);
    }
    return srl_monotonic_ns(NULL);
}

int main(int argc, char **argv)
{
    srl_config cfg;
    srl_policy_error pe;
    srl_limiter *lim;
    srl_decision d;

    if (argc != 4) {
        fprintf(stderr, "usage: lock_stopper NAME SPEC KEY\n");
        return 1;
    }
    if (srl_config_parse(&cfg, argv[2], &pe) != 0) {
        fprintf(stderr, "lock_stopper: bad spec at byte %zu: %s\n", (size_t) pe.offset,
                pe.message);
        return 1;
    }
    cfg.ticker.now = stop_ticker;
    int rc = srl_open_shared(argv[1], &cfg, 0, &lim);
    if (rc != 0) {
        fprintf(stderr, "lock_stopper: cannot open %s: %s\n", argv[1], srl_strerror(rc));
        return 1;
    }
    armed = 1;
    rc = srl_acquire(lim, argv[3], strlen(argv[3]), 1, &d);
    srl_close(lim);
    srl_config_free(&cfg);
    if (rc != 0) {
        fprintf(stderr, "lock_stopper: srl_acquire: %s\n", srl_strerror(rc));
        return 1;
    }
    return 0;
}
