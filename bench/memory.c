/*
 * memory.c - what a tracked key costs in bytes, and a 10M-key segment.
 *
 * Shared store: srl_info gives the slot size and the segment's total bytes,
 * which are a fixed part (the header and policy pages, once per segment)
 * plus the table (bucket heads and slots, growing with the capacity).  The
 * 64 B/slot target is about the table, so the two are reported apart:
 * srl_info has no bucket size, so a second segment of the same config with
 * another bucket count splits them (split_segment).  Bytes per key is
 * segment_bytes / filled for the load the table really reaches: keys
 * are inserted (one request each, policies with a one-minute window so no
 * state comes to rest and gets reclaimed during the fill) until the first
 * request is decided "untracked" (no slot free in its buckets).
 *
 * Local store: resident bytes per key, from /proc/self/statm before the
 * limiter is opened and after n keys were inserted (the call_rcu worker
 * may still be at work, so the measure waits for it to settle).  This
 * counts the index and the homes, which are mappings of their own, and
 * malloc's headers for the overflow chunks: what the process pays.  With
 * transparent huge pages a touched 2 MiB counts whole, as it costs.
 *
 * Creation: srl_open_shared(SRL_CREATE) of a big token-bucket segment (no
 * key display), timed, then one request for each of the first million keys
 * (first touch of those pages).
 *
 * Concurrency: single process; each segment is unlinked as soon as it is
 * open (bench_open).
 */
#include "bench.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The memory policies: the timed runs' permits, a one-minute window. */
static srl_policy mem_policy(srl_algorithm a)
{
    srl_policy p = bench_policy_allow(a);
    if (a != SRL_SLIDING_LOG)
        p.permits = 100;
    p.window_ns = 60ull * 1000000000ull;
    return p;
}

static void fill_key(unsigned char *buf, uint64_t i)
{
    char tmp[32]; /* 16 used: indices stay below 10^14 */
    snprintf(tmp, sizeof tmp, "f:%014llu", (unsigned long long)i);
    memcpy(buf, tmp, BENCH_KEY_LEN);
}

/* Split big's segment into table and fixed bytes: open cfg again with one
 * bucket (two if big has one), so that the bytes the segment gains per
 * bucket are the table's and what is left at zero buckets is fixed.
 * Measured, not taken from the layout, so the report follows the library.
 * Leaves both 0 if the two segments do not fit that line exactly. */
static int split_segment(const srl_config *cfg, const srl_info *big, uint64_t *table,
                         uint64_t *fixed)
{
    srl_config c = *cfg;
    c.capacity = (uint64_t)big->slots_per_bucket * (big->buckets > 1 ? 1 : 2);
    srl_limiter *lim = NULL;
    srl_info small;
    int rc = bench_open(BENCH_SHARED, &c, &lim);
    if (rc == 0)
        rc = srl_info_get(lim, &small);
    srl_close(lim);
    if (rc != 0 || small.buckets == big->buckets)
        return rc;
    const srl_info *lo = small.buckets < big->buckets ? &small : big;
    const srl_info *hi = lo == big ? &small : big;
    uint64_t db = hi->buckets - lo->buckets, ds = hi->segment_bytes - lo->segment_bytes;
    if (hi->segment_bytes < lo->segment_bytes || ds % db != 0)
        return 0;
    uint64_t per_bucket = ds / db;
    if (lo->segment_bytes < lo->buckets * per_bucket)
        return 0;
    *table = big->buckets * per_bucket;
    *fixed = big->segment_bytes - *table;
    return 0;
}

void bench_mem_shared(srl_algorithm a, uint32_t display, uint64_t capacity,
                      bench_mem_row *out)
{
    memset(out, 0, sizeof *out);
    out->algo = a;
    out->display = display;
    out->policy = mem_policy(a);
    out->state_bytes = (uint32_t)srl_state_size(&out->policy);
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = out->policy;
    cfg.capacity = capacity;
    cfg.key_display = display;
    srl_limiter *lim = NULL;
    int rc = bench_open(BENCH_SHARED, &cfg, &lim);
    srl_info info;
    if (rc == 0)
        rc = srl_info_get(lim, &info);
    if (rc != 0) {
        out->rc = rc;
        srl_close(lim);
        return;
    }
    out->slot_bytes = info.slot_bytes;
    out->capacity = info.capacity;
    out->segment_bytes = info.segment_bytes;
    unsigned char key[BENCH_KEY_LEN];
    srl_decision d;
    for (uint64_t i = 0; i < 2 * info.capacity + 16; i++) {
        fill_key(key, i);
        rc = srl_acquire(lim, key, sizeof key, 1, &d);
        if (rc != 0) {
            out->rc = rc;
            break;
        }
        if (d.flags & SRL_DECISION_UNTRACKED)
            break;
    }
    srl_stats st;
    if (srl_stats_get(lim, &st) == 0)
        out->filled = st.used;
    srl_close(lim);
    int src = split_segment(&cfg, &info, &out->table_bytes, &out->fixed_bytes);
    if (out->rc == 0)
        out->rc = src;
}

static size_t resident_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

double bench_mem_local(srl_algorithm a, uint64_t n, int *rc)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = mem_policy(a);
    cfg.capacity = n + n / 4;
    size_t h0 = resident_bytes();
    srl_limiter *lim = NULL;
    *rc = srl_open_local(&cfg, &lim);
    if (*rc != 0)
        return 0;
    unsigned char key[BENCH_KEY_LEN];
    srl_decision d;
    for (uint64_t i = 0; i < n && *rc == 0; i++) {
        fill_key(key, i);
        *rc = srl_acquire(lim, key, sizeof key, 1, &d);
    }
    /* Let the call_rcu worker settle. */
    size_t h1 = resident_bytes(), prev;
    for (int i = 0; i < 20; i++) {
        usleep(20000);
        prev = h1;
        h1 = resident_bytes();
        if (h1 == prev && i >= 2)
            break;
    }
    srl_close(lim);
    return h1 > h0 ? (double)(h1 - h0) / (double)n : 0;
}

void bench_create_big(uint64_t capacity, bench_create_result *out)
{
    memset(out, 0, sizeof *out);
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = mem_policy(SRL_TOKEN_BUCKET);
    cfg.capacity = capacity;
    srl_limiter *lim = NULL;
    uint64_t t0 = bench_now_ns();
    int rc = bench_open(BENCH_SHARED, &cfg, &lim);
    uint64_t t1 = bench_now_ns();
    out->seconds = (double)(t1 - t0) / 1e9;
    srl_info info;
    if (rc == 0)
        rc = srl_info_get(lim, &info);
    if (rc != 0) {
        out->rc = rc;
        srl_close(lim);
        return;
    }
    out->capacity = info.capacity;
    out->segment_bytes = info.segment_bytes;
    unsigned char key[BENCH_KEY_LEN];
    srl_decision d;
    uint64_t n = capacity < 1000000 ? capacity : 1000000;
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        fill_key(key, i);
        rc = srl_acquire(lim, key, sizeof key, 1, &d);
    }
    out->first_pass_seconds = (double)(bench_now_ns() - t0) / 1e9;
    out->rc = rc;
    srl_close(lim);
}
