/*
 * rlctl_worker.c - a stand-in for a server worker, for the rlctl tests.
 *
 *   rlctl_worker NAME until-stopped MIN_ROUNDS HEXKEY...
 *   rlctl_worker NAME hold N HEXKEY
 *
 * hold: srl_enter N units of the key (a concurrency policy), print "held\n"
 * and wait until killed (a holder for rlctl to show, or to die holding).
 *
 * Opens the existing segment NAME (its own policy: cfg NULL, no create) and
 * acquires every key (given in hex, so keys may be binary) once per round,
 * each round starting one key further along so workers do not march in
 * step.  It runs at least MIN_ROUNDS rounds and until the test stops it
 * with SIGTERM (never for a fixed time: a test decides when the overlap it
 * needs has happened).  After each round it writes one byte to fd 3 if fd 3
 * is open (the test's progress pipe, non-blocking: a full pipe only loses
 * bytes the test has not read yet).  When stopped it prints one line per key,
 *     HEXKEY ALLOWED DENIED
 * and exits 0.  Any srl error (a lock timeout included) is printed to stderr
 * and makes it exit 2 at the end; bad arguments exit 64.
 *
 * One thread; no state shared with other workers but the segment.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srl.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

struct key {
    const char *hex;
    unsigned char bytes[SRL_KEY_MAX];
    size_t len;
    unsigned long long allowed, denied;
};

static int decode(struct key *k, const char *hex)
{
    size_t n = strlen(hex);
    if (n == 0 || n % 2 != 0 || n / 2 > SRL_KEY_MAX)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        k->bytes[i] = (unsigned char)(hi * 16 + lo);
    }
    k->hex = hex;
    k->len = n / 2;
    return 0;
}

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

/* Open the segment with its own policy (SRL_ADOPT) and a 10 s lock wait:
 * the race test asserts that no wait times out, and on a loaded 2-core
 * machine under ASan a bucket holder can be descheduled for longer than
 * the default 1 s without anything being wrong; 10 s still catches a lock
 * that rlctl holds across a walk. */
static int open_adopting(const char *name, srl_limiter **lim)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.lock_timeout_ms = 10000;
    return srl_open_shared(name, &cfg, SRL_ADOPT, lim);
}

static int hold(const char *name, const char *count, const char *hexkey)
{
    struct key k;
    char *end;
    unsigned long n = strtoul(count, &end, 10);
    if (*end != '\0' || decode(&k, hexkey) != 0)
        return 64;
    srl_limiter *lim;
    int rc = open_adopting(name, &lim);
    if (rc != 0) {
        fprintf(stderr, "rlctl_worker: %s: %s\n", name, srl_strerror(rc));
        return 2;
    }
    for (unsigned long i = 0; i < n; i++) {
        srl_lease l;
        srl_decision d;
        rc = srl_enter(lim, k.bytes, k.len, &l, &d);
        if (rc != 0 || !d.allowed) {
            fprintf(stderr, "rlctl_worker: enter: %s\n", rc ? srl_strerror(rc) : "denied");
            return 2;
        }
    }
    printf("held\n");
    fflush(stdout);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: rlctl_worker NAME until-stopped MIN_ROUNDS HEXKEY...\n");
        return 64;
    }
    const char *name = argv[1];
    char *end;
    if (strcmp(argv[2], "hold") == 0)
        return hold(name, argv[3], argv[4]);
    if (strcmp(argv[2], "until-stopped") != 0)
        return 64;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        return 71;
    int progress = fcntl(3, F_GETFD) == -1 ? -1 : 3;
    unsigned long min_rounds = strtoul(argv[3], &end, 10);
    if (*end != '\0')
        return 64;
    size_t nkeys = (size_t)argc - 4;
    struct key *keys = calloc(nkeys, sizeof *keys);
    if (keys == NULL)
        return 71;
    for (size_t i = 0; i < nkeys; i++)
        if (decode(&keys[i], argv[4 + i]) != 0) {
            fprintf(stderr, "rlctl_worker: bad hex key '%s'\n", argv[4 + i]);
            free(keys);
            return 64;
        }
    srl_limiter *lim;
    int rc = open_adopting(name, &lim);
    if (rc != 0) {
        fprintf(stderr, "rlctl_worker: open %s: %s\n", name, srl_strerror(rc));
        free(keys);
        return 2;
    }
    int errors = 0;
    for (unsigned long round = 0; round < min_rounds || !stop; round++) {
        for (size_t i = 0; i < nkeys; i++) {
            struct key *k = &keys[(i + round) % nkeys];
            srl_decision d;
            rc = srl_acquire(lim, k->bytes, k->len, 1, &d);
            if (rc != 0) {
                if (errors++ < 10)
                    fprintf(stderr, "rlctl_worker: acquire %s: %s\n", k->hex, srl_strerror(rc));
                continue;
            }
            if (d.allowed)
                k->allowed++;
            else
                k->denied++;
        }
        if (progress >= 0 && write(progress, "r", 1) < 0) {
            /* EAGAIN: the test has not drained the pipe; nothing lost it needs */
        }
    }
    srl_close(lim);
    for (size_t i = 0; i < nkeys; i++)
        printf("%s %llu %llu\n", keys[i].hex, keys[i].allowed, keys[i].denied);
    free(keys);
    if (fflush(stdout) != 0)
        return 74;
    return errors ? 2 : 0;
}
