/*
 * make_seed.c - writes valid small segments for the segment fuzzer's seed
 * corpus: make_seed DIR creates, fills a few keys in, and copies out
 * segments of each algorithm, a compound, a concurrency limit with units
 * held, a limit with a ban period, a segment with three tiers (keys in
 * each; layout 5) and one whose policy was changed live, with keys on both
 * generations (layout 6); the GCRA one created lock-free (16-aligned slots,
 * lf_open set at birth, its keys' repeats decided by CAS: layouts 7 and 8)
 * (capacity 8, key_display 8), then unlinks them.  run.sh builds it
 * (build-fuzz/make_seed); the committed seeds in corpus/segment/ came from
 * it, and must be made again whenever the layout version changes (a seed
 * of another version is refused at its first check and fuzzes nothing;
 * the core test fuzz_seeds_current says so): tests/fuzz/README.md.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srl.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        return 64;
    static const char *policies[] = {"token_bucket:3/1h", "sliding_log:3/1h",
                                     "sliding_counter:3/1h", "gcra:3/1h",
                                     "token_bucket:3/1h,burst=5 + gcra:5/1m",
                                     "concurrency:3", "sliding_log:2/1h,penalty=1m",
                                     "token_bucket:3/1h", "token_bucket:3/1h"};
    /* The last policy gets these tiers, and key k goes to tier k. */
    srl_tier tiers[2];
    memset(tiers, 0, sizeof tiers);
    strcpy(tiers[0].name, "paid");
    strcpy(tiers[1].name, "log");
    if (srl_limits_parse_ex("token_bucket:9/1h + gcra:4/1m", &tiers[0].limits, NULL) != 0 ||
        srl_limits_parse_ex("sliding_log:4/1h", &tiers[1].limits, NULL) != 0)
        return 1;
    int last = (int)(sizeof policies / sizeof policies[0]) - 2;
    int changed = last + 1;   /* policy generation 1, keys of 0 and of 1 */
    for (int i = 0; i < (int)(sizeof policies / sizeof policies[0]); i++) {
        char name[64], src[96], dst[4096];
        snprintf(name, sizeof name, "/srl-fuzz-seed-%d-%d", (int)getpid(), i);
        srl_config cfg;
        srl_config_init(&cfg);
        if (srl_limits_parse_ex(policies[i], &cfg.limits, NULL) != 0)
            return 1;
        cfg.capacity = 8;
        cfg.key_display = 8;
        if (strncmp(policies[i], "gcra:", 5) == 0)
            cfg.flags = SRL_CONFIG_LOCKFREE;
        if (i == last) {
            cfg.tiers = tiers;
            cfg.tier_count = 2;
        }
        srl_limiter *lim;
        if (srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim) != 0)
            return 1;
        static const char *keys[] = {"a", "b", "key-1"};
        for (int k = 0; k < 3; k++) {
            if (i == changed && k == 2) {
                srl_limits l;
                if (srl_limits_parse_ex("token_bucket:5/1h", &l, NULL) != 0 ||
                    srl_policy_change_tier(lim, 0, &l, NULL, 0) != 1)
                    return 1;
            }
            srl_decision d;
            for (int n = 0; n <= k; n++) {
                srl_lease l;
                uint32_t tier = i == last ? (uint32_t)k : 0;
                if (srl_acquire_tier(lim, tier, keys[k], strlen(keys[k]), 1, &d) == SRL_ENOTSUP)
                    srl_enter(lim, keys[k], strlen(keys[k]), &l, &d);   /* units stay held */
            }
        }
        srl_close(lim);
        snprintf(src, sizeof src, "/dev/shm%s", name);
        snprintf(dst, sizeof dst, "%s/seed-%d", argv[1], i);
        FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
        if (in == NULL || out == NULL)
            return 1;
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, n, out);
        fclose(in);
        if (fclose(out) != 0)
            return 1;
        srl_unlink(name);
    }
    return 0;
}
