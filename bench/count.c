/*
 * count.c - srl-count: N decisions and nothing else, for counting their
 * instructions under callgrind (bench/insns.sh), where the machine's load
 * does not reach: no clock is read, no time is printed.
 *
 *   srl-count N SPEC [KEYS]   N srl_acquire calls of cost 1 on a new shared
 *                             segment made with SPEC (srl_config_parse's
 *                             text), cycling over KEYS keys (default 1000)
 *
 * Prints the number admitted.  The segment is unlinked at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "srl.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: srl-count N SPEC [KEYS]\n");
        return 2;
    }
    long n = atol(argv[1]), keys = argc > 3 ? atol(argv[3]) : 1000;
    srl_config cfg;
    srl_policy_error e;
    srl_config_init(&cfg);
    if (n < 0 || keys < 1 || srl_config_parse(&cfg, argv[2], &e) != 0) {
        fprintf(stderr, "srl-count: bad N, KEYS or SPEC \"%s\"\n", argv[2]);
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, "/srl-count-%ld", (long)getpid());
    srl_limiter *lim;
    int rc = srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim);
    if (rc != 0) {
        fprintf(stderr, "srl-count: open %s: %s\n", name, srl_strerror(rc));
        return 1;
    }
    /* The keys are made before the loop: only decisions are counted. */
    char (*key)[16] = calloc((size_t)keys, sizeof *key);
    int *len = calloc((size_t)keys, sizeof *len);
    if (key == NULL || len == NULL)
        return 1;
    for (long k = 0; k < keys; k++)
        len[k] = snprintf(key[k], sizeof key[k], "k%ld", k);
    long admitted = 0;
    srl_decision d;
    for (long i = 0, k = 0; i < n; i++, k = k + 1 == keys ? 0 : k + 1)
        if (srl_acquire(lim, key[k], (size_t)len[k], 1, &d) == 0 && d.allowed)
            admitted++;
    printf("%ld\n", admitted);
    srl_close(lim);
    srl_unlink(name);
    free(key);
    free(len);
    return 0;
}
