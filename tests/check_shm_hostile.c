/*
 * check_shm_hostile.c - the shared store treats its segment as untrusted input.
 *
 * DESIGN.md: "Bad input gets a clear error and changes nothing: a corrupt or
 * foreign segment ... Nothing crashes, nothing hangs."  This suite attacks
 * real named segments in /dev/shm the way another process could: it edits
 * the file with pwrite(2) or through its own MAP_SHARED mapping, truncates
 * it, puts other kinds of object at the name, and feeds the policy parser
 * random text.  Every test runs in Check's fork mode with an alarm() guard,
 * so a crash or a hang is a failure of that test only; the ASan/UBSan build
 * proves that no corruption makes the store read or write out of bounds.
 *
 * What the store does with each corruption (docs/design.md, "Create and
 * open" and "Trust model"), as asserted here:
 *
 *   Header at open (a snapshot is validated; nothing is written on refusal):
 *     magic -> SRL_EFOREIGN; version, ABI word -> SRL_EVERSION;
 *     state INIT with a live creator -> SRL_ETIMEDOUT after the bounded wait,
 *     FAILED -> SRL_ESTALE after the retries, anything else -> SRL_ECORRUPT;
 *     limits (but limit 0's permits and window), buckets, capacity,
 *     table_offset, total_bytes and the four
 *     geometry words -> SRL_ECORRUPT (geometry is recomputed from policy and
 *     capacity and must equal every stored word);
 *     limit 0's permits, window_ns, burst -> SRL_ECORRUPT if invalid, else ADOPTED by an
 *     opener without a config (and SRL_EMISMATCH with one): the header has no
 *     checksum, so a valid-looking policy cannot be told from the real one;
 *     key_display -> SRL_ECORRUPT if it changes the slot or bucket size,
 *     else adopted like the policy (slots are rounded up to 8 bytes, so some
 *     neighbouring displays share a geometry; key_display 0 stores no
 *     key_len, so 0 shares it with none);
 *     mode -> the write allowance of an opener without a config (the file's
 *     own mode must not grant group/other write beyond it): no effect on a
 *     0600 file, which is what the byte sweep uses; see the mode test;
 *     on_full (informational: adopted as deny iff it is 1), creator_pid,
 *     created_unix_ns, hash_key and the page's padding (bytes 128..4095) ->
 *     IGNORED for the decision to open (a new hash key only makes existing
 *     keys unreachable; they are reclaimed once at rest).
 *   Table while open (live handle; srl_check is the detector):
 *     DETECTED by srl_check, one problem line each: a tag that does not match
 *     its fingerprint, a key that is in neither of its candidate buckets,
 *     key_len 0 or > SRL_KEY_MAX, an invalid state, a duplicate fingerprint,
 *     a nonzero undo_slot or moving_slot (any value: out of range or not).
 *     TOLERATED (not detectable, and harmless to memory safety): a cleared
 *     tag (the key is forgotten and starts fresh), fingerprint bytes that
 *     keep the tag and the bucket, a state changed to another valid state,
 *     the per-bucket and per-key counters (statistics), the undo area while
 *     undo_slot is 0, the display bytes.
 *   Bucket mutexes (their lock state): random bytes give 0, SRL_ETIMEDOUT
 *   (bounded), SRL_ENOTRECOVERABLE or SRL_ESYS with a DEGRADED decision,
 *   never a crash or a hang, and srl_check reports the lock it cannot take.
 *   Their type word (glibc's __kind): any value but srl's own is
 *   SRL_ECORRUPT with a DEGRADED decision before glibc sees it, and
 *   srl_check reports it without locking the bucket.
 *
 * Concurrency: single process per test (forked children only for other
 * uids); the suite is in the 'shared' meson suite (not run in parallel).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cas16.h"
#include "shm.h"
#include "srl.h"
#include "testutil.h"
#include "shm_testutil.h"

/* ------------------------------------------------------------ helpers */

/* A small deterministic PRNG (xorshift64*): fixed seeds, reproducible runs. */
static uint64_t rnd_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
    return rnd_next(s) % n;
}

/* The hang guard: SIGALRM with its default action, so a hang is reported
 * as "Received signal 14" (Check's fork-mode children inherit the runner's
 * own SIGALRM handler otherwise, which kills them with SIGKILL). */
static void guard(unsigned seconds)
{
    signal(SIGALRM, SIG_DFL);
    alarm(seconds);
}

static srl_config config(srl_algorithm a, uint32_t permits, uint64_t capacity, uint32_t kd)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = a, .permits = permits, .window_ns = 60 * SEC};
    cfg.capacity = capacity;
    cfg.key_display = kd;
    return cfg;
}

static const char *path_of(const char *name)
{
    static char buf[300];
    snprintf(buf, sizeof buf, "/dev/shm%s", name);
    return buf;
}

/* Create a good segment and close it; returns its name (static). */
static const char *make_segment(const char *tag, const srl_config *cfg)
{
    static char name[128];
    snprintf(name, sizeof name, "%s", unique_name(tag));
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_close(lim);
    return name;
}

/* The hang guard, then the suite's usual victim: token_bucket:100/60s,
 * capacity 64, display 0, in *cfg; returns the new segment's name. */
static const char *guarded_segment(unsigned seconds, const char *tag, srl_config *cfg)
{
    guard(seconds);
    *cfg = config(SRL_TOKEN_BUCKET, 100, 64, 0);
    return make_segment(tag, cfg);
}

/* The whole file, malloc'd; *len its size. */
static unsigned char *slurp(const char *name, size_t *len)
{
    int fd = open(path_of(name), O_RDONLY);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    *len = (size_t)st.st_size;
    unsigned char *buf = malloc(*len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(pread(fd, buf, *len, 0), (ssize_t)*len);
    close(fd);
    return buf;
}

static void read_header(const char *name, struct srl__shm_header *h)
{
    int fd = open(path_of(name), O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, h, sizeof *h, 0), (ssize_t)sizeof *h);
    close(fd);
}

/* Recompute the header checksum after an edit, so the edit reaches the
 * checks behind it (an attacker with write access can do the same). */
static void reseal(const char *name)
{
    struct srl__shm_header h;
    read_header(name, &h);
    shm_poke64(name, offsetof(struct srl__shm_header, header_sum), srl__shm_header_sum(&h));
}

/* Open, and on success use the handle: a probe key is decided, srl_check
 * finds nothing wrong, and the probe is forgotten again.  On failure the
 * handle pointer must be NULL.  *info is filled on success. */
static int open_and_use(const char *name, const srl_config *cfg, unsigned flags, srl_info *info)
{
    srl_limiter *lim = (srl_limiter *)0x1;
    int rc = srl_open_shared(name, cfg, flags, &lim);
    if (rc != 0) {
        ck_assert_ptr_null(lim);
        return rc;
    }
    ck_assert_int_eq(srl_info_get(lim, info), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "probe", 5, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.limit, info->policy.burst ? info->policy.burst : info->policy.permits);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    ck_assert_int_eq(srl_reset_key(lim, "probe", 5), 0);
    srl_close(lim);
    return 0;
}

/* An open that must be refused with `want` and must not change one byte. */
static void assert_refused(const char *name, const srl_config *cfg, unsigned flags, int want,
                           size_t off, unsigned value)
{
    size_t n0, n1;
    unsigned char *before = slurp(name, &n0);
    srl_info info;
    int rc = open_and_use(name, cfg, flags, &info);
    unsigned char *after = slurp(name, &n1);
    ck_assert_msg(rc == want, "edit at %zu = %#x (cfg %s, flags %u): rc %d (%s), want %d (%s)",
                  off, value, cfg ? "yes" : "no", flags, rc, srl_strerror(rc), want,
                  srl_strerror(want));
    ck_assert_msg(n0 == n1 && memcmp(before, after, n0) == 0,
                  "edit at %zu = %#x: a refused open changed the file", off, value);
    free(before);
    free(after);
}

/* assert_refused for an opener without a config and one with cfg. */
static void assert_refused_with_and_without_config(const char *name, const srl_config *cfg,
                                                   int want, size_t off, unsigned value)
{
    assert_refused(name, NULL, 0, want, off, value);
    assert_refused(name, cfg, 0, want, off, value);
}

/* ...and also for one that would create it (SRL_CREATE must not help). */
static void assert_refused_by_every_opener(const char *name, const srl_config *cfg, int want,
                                           size_t off, unsigned value)
{
    assert_refused_with_and_without_config(name, cfg, want, off, value);
    assert_refused(name, cfg, SRL_CREATE, want, off, value);
}

/* The segment opens and is usable for an opener without a config and one with cfg. */
static void assert_usable_with_and_without_config(const char *name, const srl_config *cfg)
{
    srl_info info;
    ck_assert_int_eq(open_and_use(name, NULL, 0, &info), 0);
    ck_assert_int_eq(open_and_use(name, cfg, 0, &info), 0);
}

/* The geometry the store computes for cfg (slot and bucket sizes follow
 * the layout in shm.h, so this suite follows layout changes). */
static struct srl__shm geometry_of(const srl_config *cfg)
{
    struct srl__shm g;
    memset(&g, 0, sizeof g);
    ck_assert_int_eq(srl__shm_geometry(&g, cfg), 0);
    return g;
}

/* ------------------------------------------------ header corruption */

#define F(field) offsetof(struct srl__shm_header, field)
#define IN(off, field) ((size_t)(off) - F(field) < sizeof(((struct srl__shm_header *)0)->field))

/* What opening a token_bucket:100/60s, capacity 64, display 0 segment whose
 * header byte `off` now reads as *h gives.  Returns the expected code; 0 for
 * an open that succeeds (*adopt says whether the field is adopted by an
 * opener without a config and so is a mismatch for one with the original
 * config). */
/* *adopt: the segment opens, as it says, for an adopter only.  *creation:
 * the byte is part of the policy at creation, which layout 6 keeps in the
 * header for the geometry check only: the policy in use is the current copy
 * (page 1), untouched here, so a consistent edit is provably ignored by
 * adopters and openers with the config alike. */
static int expected_open(size_t off, const struct srl__shm_header *h, bool *adopt, bool *creation)
{
    *adopt = false;
    *creation = IN(off, limits);
    if (IN(off, magic))
        return SRL_EFOREIGN;
    if (IN(off, version) || IN(off, abi))
        return SRL_EVERSION;
    if (IN(off, state))
        return h->state == SRL__SHM_INIT ? SRL_ETIMEDOUT     /* our own pid: alive */
             : h->state == SRL__SHM_FAILED ? SRL_ESTALE
             : SRL_ECORRUPT;
    if (IN(off, limits.limit[0].permits)) {
        *adopt = true;
        return h->limits.limit[0].permits == 0 ? SRL_ECORRUPT : 0;
    }
    if (IN(off, limits.limit[0].burst)) {
        /* Another capacity for the same state size: adopted, unless it is
         * the non-canonical burst = permits (a creator writes 0 for that). */
        *adopt = true;
        return h->limits.limit[0].burst == h->limits.limit[0].permits ||
                       srl_policy_validate(&h->limits.limit[0]) != 0
                   ? SRL_ECORRUPT   /* too big to refill within 3660 d */
                   : 0;
    }
    if (IN(off, limits.limit[0].window_ns)) {
        *adopt = true;
        return h->limits.limit[0].window_ns == 0 || h->limits.limit[0].window_ns > SRL_WINDOW_MAX_NS ? SRL_ECORRUPT : 0;
    }
    if (IN(off, key_display)) {
        /* Accepted only if the slot and bucket sizes stay what they are. */
        *adopt = true;
        if (h->key_display > SRL_KEY_DISPLAY_MAX)
            return SRL_ECORRUPT;
        srl_config c = config(SRL_TOKEN_BUCKET, 100, 64, h->key_display);
        struct srl__shm g = geometry_of(&c);
        return g.slot_bytes != h->slot_bytes || g.bucket_bytes != h->bucket_bytes ? SRL_ECORRUPT
                                                                                  : 0;
    }
    if (IN(off, on_full) || IN(off, mode) || IN(off, creator_pid) || IN(off, created_unix_ns) ||
        IN(off, hash_key) || IN(off, creator_start) || IN(off, creator_pidns) ||
        IN(off, header_sum))
        return 0;
    /* The rest of limits (count, algorithm: any other value changes the
     * state size or is unknown; limits 1..3 and the reserved words must be
     * zero in the canonical form), buckets, capacity, table_offset,
     * total_bytes, slots_per_bucket, bucket_bytes, slot_bytes, state_bytes:
     * corruption or geometry. */
    return SRL_ECORRUPT;
}

START_TEST(every_header_byte_set_to_a_bad_value_is_refused_with_its_code_or_provably_ignored)
{
    srl_config cfg;
    const char *name = guarded_segment(200, "hdr", &cfg);
    struct srl__shm_header orig;
    read_header(name, &orig);
    ck_assert_uint_eq(orig.slot_bytes, geometry_of(&cfg).slot_bytes);
    const unsigned char *ob = (const unsigned char *)&orig;
    for (size_t off = 0; off < sizeof orig; off++) {
        unsigned o = ob[off];
        unsigned values[] = {0x00, 0x01, 0x02, 0x03, 0x07, 0x7f, 0x80, 0xff,
                             (o + 1) & 0xff, (o - 1) & 0xff, o ^ 0x10};
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            unsigned char bad = (unsigned char)values[v];
            bool dup = bad == o;
            for (size_t w = 0; w < v && !dup; w++)
                dup = values[w] == bad;
            if (dup)
                continue;
            /* Only a state of INIT waits (2 s per open); try it for one value. */
            struct srl__shm_header h = orig;
            ((unsigned char *)&h)[off] = bad;
            shm_poke(name, off, &bad, 1);
            /* Any edit of a checksummed byte is caught by the checksum... */
            if (!IN(off, magic) && !IN(off, version) && !IN(off, abi) && !IN(off, state)) {
                assert_refused_with_and_without_config(name, &cfg, SRL_ECORRUPT, off, bad);
                /* ...and, resealed, by the checks behind it (or ignored). */
                reseal(name);
            }
            bool adopt, creation;
            int want = expected_open(off, &h, &adopt, &creation);
            if (want != 0) {
                assert_refused_by_every_opener(name, &cfg, want, off, bad);
            } else {
                srl_info info;
                int rc = open_and_use(name, NULL, 0, &info);
                ck_assert_msg(rc == 0, "header byte %zu = %#x: rc %d, want 0", off, bad, rc);
                const srl_limits *now = creation ? &orig.limits : &h.limits;
                ck_assert_uint_eq(info.policy.permits, now->limit[0].permits);
                ck_assert_uint_eq(info.policy.window_ns, now->limit[0].window_ns);
                ck_assert_uint_eq(info.key_display, h.key_display);
                ck_assert_int_eq(info.on_full, h.on_full == SRL_ON_FULL_DENY    ? SRL_ON_FULL_DENY
                                               : h.on_full == SRL_ON_FULL_EVICT ? SRL_ON_FULL_EVICT
                                                                                : SRL_ON_FULL_ALLOW);
                ck_assert_uint_eq(info.capacity, 64);
                if (adopt && !creation) {
                    assert_refused(name, &cfg, 0, SRL_EMISMATCH, off, bad);
                    assert_refused(name, &cfg, SRL_CREATE, SRL_EMISMATCH, off, bad);
                } else {
                    ck_assert_int_eq(open_and_use(name, &cfg, 0, &info), 0);
                    ck_assert_int_eq(open_and_use(name, &cfg, SRL_CREATE, &info), 0);
                }
            }
            shm_poke(name, 0, ob, sizeof orig);
        }
    }
    /* The rest of the header page is padding: ignored, whatever it holds
     * (up to the live counters; policy_gen is tested in check_shm_live). */
    unsigned char pad[SRL__SHM_LIVE_OFFSET - sizeof orig];
    memset(pad, 0xa5, sizeof pad);
    shm_poke(name, sizeof orig, pad, sizeof pad);
    assert_usable_with_and_without_config(name, &cfg);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* A table of `buckets` buckets for `capacity` keys in a file of `total`
 * bytes, resealed: a header consistent in itself, whatever the file holds. */
static void poke_table_size(const char *name, uint64_t buckets, uint64_t capacity, uint64_t total)
{
    shm_poke64(name, F(buckets), buckets);
    shm_poke64(name, F(capacity), capacity);
    shm_poke64(name, F(total_bytes), total);
    shm_poke64(name, F(op_offset), total - SRL__SHM_OP_BYTES);   /* layout 9: consistent */
    reseal(name);
}

/* Slot and bucket sizes as like's geometry has them, and the file size
 * they give for `buckets` buckets, resealed. */
static void poke_sizes_of(const char *name, const srl_config *like, uint64_t buckets)
{
    struct srl__shm g = geometry_of(like);
    shm_poke32(name, F(slot_bytes), (uint32_t)g.slot_bytes);
    shm_poke32(name, F(bucket_bytes), (uint32_t)g.bucket_bytes);
    uint64_t total = SRL__SHM_HEADER_BYTES + buckets * g.bucket_bytes + SRL__SHM_OP_BYTES;
    shm_poke64(name, F(total_bytes), total);
    shm_poke64(name, F(op_offset), total - SRL__SHM_OP_BYTES);
    reseal(name);
}

START_TEST(header_fields_that_lie_together_are_corrupt_unless_the_file_really_holds_them)
{
    srl_config cfg;
    const char *name = guarded_segment(60, "lie", &cfg);
    struct srl__shm_header orig;
    read_header(name, &orig);
    srl_info info;

    /* The largest table, consistent in itself, in a 8 KiB file. */
    poke_table_size(name, 1ull << 28, 1ull << 32,
                    SRL__SHM_HEADER_BYTES + (1ull << 28) * orig.bucket_bytes);
    assert_refused(name, NULL, 0, SRL_ECORRUPT, F(capacity), 0);
    /* Beyond SRL_CAPACITY_MAX, consistent: refused before any size is computed. */
    poke_table_size(name, 1ull << 40, 1ull << 44,
                    SRL__SHM_HEADER_BYTES + (1ull << 40) * orig.bucket_bytes);
    assert_refused(name, NULL, 0, SRL_ECORRUPT, F(capacity), 0);
    /* A total that wraps 64 bits. */
    poke_table_size(name, UINT64_MAX / 16, UINT64_MAX / 16 * 16, UINT64_MAX);
    assert_refused(name, NULL, 0, SRL_ECORRUPT, F(capacity), 0);
    /* A smaller table than the file holds is a consistent segment: opened
     * with that capacity (the extra bytes are never touched). */
    poke_table_size(name, 2, 32, SRL__SHM_HEADER_BYTES + 2ull * orig.bucket_bytes + SRL__SHM_OP_BYTES);
    ck_assert_int_eq(open_and_use(name, NULL, 0, &info), 0);
    ck_assert_uint_eq(info.capacity, 32);
    assert_refused(name, &cfg, 0, SRL_EMISMATCH, F(capacity), 0);
    shm_poke(name, 0, &orig, sizeof orig);

    /* The largest display, with slot and bucket sizes that agree with it. */
    srl_config wide = config(SRL_TOKEN_BUCKET, 100, 64, 255);
    shm_poke32(name, F(key_display), 255);
    poke_sizes_of(name, &wide, orig.buckets);
    assert_refused(name, NULL, 0, SRL_ECORRUPT, F(key_display), 255);
    shm_poke(name, 0, &orig, sizeof orig);

    /* A sliding log of 4096 permits (32 KiB states), consistent, file too small. */
    shm_poke32(name, F(limits.limit[0].algorithm), SRL_SLIDING_LOG);
    shm_poke32(name, F(limits.limit[0].permits), 4096);
    shm_poke32(name, F(state_bytes), 8 + 8 * 4096);
    srl_config log = config(SRL_SLIDING_LOG, 4096, 64, 0);
    ck_assert_uint_eq(geometry_of(&log).state_bytes, 8 + 8 * 4096);
    poke_sizes_of(name, &log, orig.buckets);
    assert_refused(name, NULL, 0, SRL_ECORRUPT, F(limits.limit[0].algorithm), SRL_SLIDING_LOG);
    shm_poke(name, 0, &orig, sizeof orig);

    /* table_offset that lies, alone and with total_bytes moved to match. */
    shm_poke64(name, F(table_offset), 0);
    assert_refused(name, NULL, 0, SRL_ECORRUPT, F(table_offset), 0);
    shm_poke64(name, F(table_offset), 8192);
    shm_poke64(name, F(total_bytes), orig.total_bytes + 4096);
    reseal(name);
    assert_refused(name, NULL, 0, SRL_ECORRUPT, F(table_offset), 8192);
    shm_poke(name, 0, &orig, sizeof orig);

    /* Random words over everything after the ABI word, 2,000 times (magic,
     * version, state and ABI kept, so each header reaches validation): a
     * refusal is ECORRUPT; an accepted header is usable. */
    uint64_t seed = 0x5eed0001;
    int accepted = 0;
    for (int trial = 0; trial < 2000; trial++) {
        struct srl__shm_header h = orig;
        unsigned char *hb = (unsigned char *)&h;
        int n = 1 + (int)rnd_below(&seed, 6);
        for (int k = 0; k < n; k++) {
            size_t off = F(buckets) + rnd_below(&seed, sizeof h - F(buckets));
            unsigned kind = (unsigned)rnd_below(&seed, 3);
            hb[off] = kind == 0 ? 0 : kind == 1 ? 0xff : (unsigned char)rnd_next(&seed);
        }
        shm_poke(name, 0, &h, sizeof h);
        int rc = open_and_use(name, NULL, 0, &info);
        ck_assert_msg(rc == 0 || rc == SRL_ECORRUPT, "trial %d: rc %d", trial, rc);
        accepted += rc == 0;
        shm_poke(name, 0, &orig, sizeof orig);
    }
    /* Both outcomes happened: the trials reached past the first check. */
    ck_assert_int_gt(accepted, 0);
    ck_assert_int_lt(accepted, 2000);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------ truncated files */

START_TEST(a_truncated_segment_is_refused_at_every_interesting_size_without_sigbus)
{
    srl_config cfg;
    const char *name0 = guarded_segment(60, "trunc", &cfg);
    struct srl__shm_header h;
    read_header(name0, &h);
    ck_assert_int_eq(srl_unlink(name0), 0);
    const struct {
        off_t size;
        int want;
    } cases[] = {
        {0, SRL_ESTALE},                        /* empty: after the bounded wait */
        {1, SRL_EFOREIGN},                      /* shorter than the header page */
        {SRL__SHM_PAGE_BYTES - 1, SRL_EFOREIGN},
        {SRL__SHM_PAGE_BYTES, SRL_ECORRUPT},    /* the header page alone (layout 6) */
        {SRL__SHM_HEADER_BYTES - 1, SRL_ECORRUPT},   /* ... and part of the policy pages */
        {SRL__SHM_HEADER_BYTES, SRL_ECORRUPT},  /* header pages only */
        {SRL__SHM_HEADER_BYTES + 1, SRL_ECORRUPT},
        {(off_t)(SRL__SHM_HEADER_BYTES + h.bucket_bytes - 1), SRL_ECORRUPT},
        {(off_t)(SRL__SHM_HEADER_BYTES + h.bucket_bytes), SRL_ECORRUPT},
        {(off_t)h.total_bytes - 1, SRL_ECORRUPT},
        {(off_t)h.total_bytes + 4096, 0},       /* longer than needed: fine */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *name = make_segment("trunc", &cfg);
        ck_assert_int_eq(truncate(path_of(name), cases[c].size), 0);
        if (cases[c].want == 0)
            assert_usable_with_and_without_config(name, &cfg);
        else
            assert_refused_with_and_without_config(name, &cfg, cases[c].want,
                                                   (size_t)cases[c].size, 0);
        ck_assert_int_eq(srl_unlink(name), 0);
    }
}
END_TEST

static pid_t dead_pid(void)
{
    pid_t pid = test_fork();
    if (pid == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

START_TEST(an_unfinished_truncated_segment_is_stale_or_timed_out_by_its_creators_life)
{
    srl_config cfg;
    const char *name = guarded_segment(60, "unfin", &cfg);
    shm_poke32(name, F(state), SRL__SHM_INIT);
    ck_assert_int_eq(truncate(path_of(name), SRL__SHM_HEADER_BYTES), 0);
    shm_poke32(name, F(creator_pid), (uint32_t)dead_pid());
    assert_refused(name, NULL, 0, SRL_ESTALE, F(state), SRL__SHM_INIT);
    assert_refused(name, &cfg, SRL_CREATE, SRL_ESTALE, F(state), SRL__SHM_INIT);
    shm_poke32(name, F(creator_pid), (uint32_t)getpid());      /* alive */
    assert_refused(name, &cfg, 0, SRL_ETIMEDOUT, F(state), SRL__SHM_INIT);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* The creator is known by pid, start time and PID namespace: a pid that now
 * belongs to another process (our own, with another start time) is a dead
 * creator; one from another namespace cannot be judged and is waited for. */
START_TEST(a_creator_is_dead_when_its_pid_was_reused_and_unknown_in_another_pid_namespace)
{
    srl_config cfg;
    const char *name = guarded_segment(60, "reuse", &cfg);
    struct srl__shm_header h;
    read_header(name, &h);
    ck_assert_int_eq(h.creator_pid, getpid());
    ck_assert_uint_ne(h.creator_start, 0);
    ck_assert_uint_ne(h.creator_pidns, 0);
    shm_poke32(name, F(state), SRL__SHM_INIT);
    shm_poke64(name, F(creator_start), h.creator_start + 1);   /* same pid, another process */
    assert_refused(name, NULL, 0, SRL_ESTALE, F(creator_start), 0);
    shm_poke64(name, F(creator_start), h.creator_start);
    shm_poke64(name, F(creator_pidns), h.creator_pidns + 1);   /* its pid means nothing here */
    shm_poke32(name, F(creator_pid), (uint32_t)dead_pid());
    assert_refused(name, NULL, 0, SRL_ETIMEDOUT, F(creator_pidns), 0);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* The owner is checked before anything is waited for or read: a stranger's
 * unfinished file is EACCES at once, not ETIMEDOUT after the ready-wait. */
START_TEST(a_strangers_unfinished_segment_is_eacces_before_any_wait)
{
    srl_config cfg;
    const char *name = guarded_segment(30, "strange", &cfg);
    shm_poke32(name, F(state), SRL__SHM_INIT);                 /* our live pid: would wait */
    ck_assert_int_eq(chown(path_of(name), 65534, 65534), 0);
    assert_refused(name, NULL, 0, SRL_EACCES, F(state), SRL__SHM_INIT);
    assert_refused(name, &cfg, SRL_CREATE, SRL_EACCES, F(state), SRL__SHM_INIT);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* Truncation under a live handle cannot be prevented (shm_open), but it is
 * seen: srl_info's file_bytes and srl_check's report, which walks only what
 * the file still backs. */
START_TEST(a_segment_truncated_under_a_live_handle_is_reported_by_check_and_info)
{
    srl_config cfg;
    const char *name = guarded_segment(30, "trunc", &cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.file_bytes, info.segment_bytes);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    uint64_t cut = SRL__SHM_HEADER_BYTES + (info.segment_bytes - SRL__SHM_HEADER_BYTES) / 2;
    ck_assert_int_eq(truncate(path_of(name), (off_t)cut), 0);
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.file_bytes, cut);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 1);
    ck_assert_int_eq(truncate(path_of(name), 100), 0);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 1);        /* not even the header is read */
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(segment_names_follow_one_rule_everywhere)
{
    static const char *bad[] = {"", "/", ".", "..", "...", "/....", "a/b", "a b", "é"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(srl_name_check(bad[i]) == SRL_EINVAL, "'%s' accepted", bad[i]);
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_shared(bad[i], NULL, 0, &lim), SRL_EINVAL);
        ck_assert_int_eq(srl_unlink(bad[i]), SRL_EINVAL);
    }
    ck_assert_int_eq(srl_name_check(NULL), SRL_EINVAL);
    static const char *good[] = {"a", "/a", ".a", "a..", "A-b_c.9", "/.x."};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(srl_name_check(good[i]) == 0, "'%s' refused", good[i]);
    char longest[SRL_NAME_MAX + 3];
    longest[0] = '/';
    memset(longest + 1, 'x', SRL_NAME_MAX);
    longest[SRL_NAME_MAX + 1] = '\0';
    ck_assert_int_eq(srl_name_check(longest), 0);
    longest[SRL_NAME_MAX + 1] = 'x';
    longest[SRL_NAME_MAX + 2] = '\0';
    ck_assert_int_eq(srl_name_check(longest), SRL_EINVAL);
}
END_TEST

/*
 * A file that shrinks AFTER a process mapped it is the classic mmap hazard:
 * the handle's next touch of a cut page raises SIGBUS.  The store does not
 * promise to survive that (it keeps no descriptor, installs no SIGBUS
 * handler, and only someone who may write the segment can truncate it: the
 * trust model's "trusted by exactly the processes that may open it").  What
 * it does promise is that every later open checks the size and refuses.
 */
START_TEST(a_segment_shrunk_after_it_was_opened_is_refused_by_every_later_open)
{
    srl_config cfg;
    const char *name = guarded_segment(30, "shrink", &cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), 0);
    struct srl__shm_header h;
    read_header(name, &h);
    ck_assert_int_eq(truncate(path_of(name), (off_t)(SRL__SHM_HEADER_BYTES + h.bucket_bytes)), 0);
    assert_refused_by_every_opener(name, &cfg, SRL_ECORRUPT, 0, 0);
    srl_close(lim);     /* unmapping a cut mapping is fine; touching it is not */
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------ foreign objects */

START_TEST(a_directory_at_the_name_is_refused_and_left_alone)
{
    guard(30);
    const char *name = unique_name("dir");
    ck_assert_int_eq(mkdir(path_of(name), 0700), 0);
    srl_config cfg = config(SRL_TOKEN_BUCKET, 100, 64, 0);
    srl_limiter *lim;
    /* "Not an srl segment", though glibc's shm_open says EINVAL for it. */
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), SRL_EFOREIGN);
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), SRL_EFOREIGN);
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE, &lim), SRL_EFOREIGN);
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), SRL_EEXIST);
    struct stat st;
    ck_assert_int_eq(lstat(path_of(name), &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(rmdir(path_of(name)), 0);
}
END_TEST

/*
 * Regression (was a defect this suite found): a FIFO (or a device node) at
 * the name was reported as SRL_ESTALE after the 2 s wait, whose remedy is
 * "unlink it", instead of SRL_EFOREIGN at once: a FIFO opened O_RDWR has
 * st_size 0 and passed for "an empty file a creator died with".
 * wait_ready() in src/shm/shm_segment.c now refuses anything but a regular file.
 */
START_TEST(a_fifo_or_a_device_node_at_the_name_is_foreign_not_stale)
{
    guard(30);
    const char *fifo = unique_name("fifo");
    ck_assert_int_eq(mkfifo(path_of(fifo), 0600), 0);
    srl_limiter *lim;
    int rc = srl_open_shared(fifo, NULL, 0, &lim);
    struct stat st;
    ck_assert_int_eq(lstat(path_of(fifo), &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));            /* left alone */
    ck_assert_int_eq(unlink(path_of(fifo)), 0);
    ck_assert_msg(rc == SRL_EFOREIGN, "FIFO: rc %d (%s), want SRL_EFOREIGN", rc, srl_strerror(rc));

    /* A character device (/dev/zero's numbers; root may mknod in /dev/shm). */
    const char *dev = unique_name("fifo");
    ck_assert_int_eq(mknod(path_of(dev), S_IFCHR | 0600, makedev(1, 5)), 0);
    /* On a nodev mount the kernel refuses the open itself: SRL_EACCES is
     * then the right answer (nothing of the store's was reached). */
    int fd = open(path_of(dev), O_RDWR);
    int want = fd < 0 && errno == EACCES ? SRL_EACCES : SRL_EFOREIGN;
    if (fd >= 0)
        close(fd);
    rc = srl_open_shared(dev, NULL, 0, &lim);
    ck_assert_int_eq(unlink(path_of(dev)), 0);
    ck_assert_msg(rc == want, "device: rc %d (%s), want %d", rc, srl_strerror(rc), want);
}
END_TEST

START_TEST(a_symlink_at_the_name_is_never_followed_to_open_create_or_clobber_its_target)
{
    guard(30);
    srl_config cfg = config(SRL_TOKEN_BUCKET, 100, 64, 0);
    /* Target: a real segment elsewhere in /dev/shm, so following the link
     * would even open successfully. */
    char target[128];
    snprintf(target, sizeof target, "%s", make_segment("link", &cfg));
    size_t n0, n1;
    unsigned char *before = slurp(target, &n0);
    const char *link = unique_name("link");
    char to[300];
    snprintf(to, sizeof to, "%s", path_of(target));
    ck_assert_int_eq(symlink(to, path_of(link)), 0);
    srl_limiter *lim;
    int codes[3];
    codes[0] = srl_open_shared(link, NULL, 0, &lim);
    codes[1] = srl_open_shared(link, &cfg, 0, &lim);
    codes[2] = srl_open_shared(link, &cfg, SRL_CREATE, &lim);
    /* glibc's shm_open adds O_NOFOLLOW: ELOOP, reported as SRL_ESYS. */
    for (int i = 0; i < 3; i++)
        ck_assert_msg(codes[i] == SRL_EFOREIGN || codes[i] == SRL_ESYS, "open %d: rc %d", i,
                      codes[i]);
    unsigned char *after = slurp(target, &n1);
    ck_assert(n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
    struct stat st;
    ck_assert_int_eq(lstat(path_of(link), &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(unlink(path_of(link)), 0);
    ck_assert_int_eq(srl_unlink(target), 0);

    /* A dangling link: creating through it must not create its target. */
    const char *dangling = unique_name("link");
    char nowhere[300];
    snprintf(nowhere, sizeof nowhere, "/dev/shm/srl-test-%d-nowhere", (int)getpid());
    ck_assert_int_eq(symlink(nowhere, path_of(dangling)), 0);
    int rc = srl_open_shared(dangling, &cfg, SRL_CREATE, &lim);
    ck_assert_msg(rc == SRL_EFOREIGN || rc == SRL_ESYS, "dangling: rc %d", rc);
    ck_assert_int_eq(access(nowhere, F_OK), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(unlink(path_of(dangling)), 0);
}
END_TEST

static int child_open(uid_t uid, const char *name, const srl_config *cfg)
{
    pid_t pid = test_fork();
    if (pid == 0) {
        if (setgid(uid) != 0 || setuid(uid) != 0)
            _exit(100);
        srl_limiter *lim;
        int rc = srl_open_shared(name, cfg, 0, &lim);
        _exit(-rc);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_ne(WEXITSTATUS(status), 100);
    return -WEXITSTATUS(status);
}

START_TEST(another_users_segment_is_eacces_for_every_opener_root_included_unless_its_owner_is_named)
{
    guard(30);
    ck_assert_int_eq(geteuid(), 0);     /* the suite runs as root */
    srl_config cfg = config(SRL_TOKEN_BUCKET, 100, 64, 0);
    cfg.mode = 0666;                    /* so only the owner rule can refuse */
    const char *name = make_segment("owner", &cfg);
    ck_assert_int_eq(chown(path_of(name), 65534, 65534), 0);
    ck_assert_int_eq(child_open(65533, name, &cfg), SRL_EACCES);
    ck_assert_int_eq(child_open(65533, name, NULL), SRL_EACCES);
    /* Root is no exception: the owner could rewrite the mutexes' robust-list
     * links while root locks them (docs/design.md, "Trust"). */
    srl_info info;
    assert_refused_by_every_opener(name, &cfg, SRL_EACCES, 0, 0);
    /* Naming the owner trusts it, and only it. */
    srl_config named = cfg;
    named.owner_uid = 65533;
    assert_refused(name, &named, 0, SRL_EACCES, 0, 0);
    named.owner_uid = 65534;
    ck_assert_int_eq(open_and_use(name, &named, 0, &info), 0);
    ck_assert_uint_eq(info.owner_uid, 65534);
    ck_assert_int_eq(open_and_use(name, &named, SRL_ADOPT, &info), 0);
    ck_assert_uint_eq(info.policy.permits, 100);
    /* Its own user opens it, of course. */
    ck_assert_int_eq(child_open(65534, name, &cfg), 0);
    /* The owner is the file's own: nothing was chowned back. */
    struct stat st;
    ck_assert_int_eq(stat(path_of(name), &st), 0);
    ck_assert_uint_eq(st.st_uid, 65534);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_world_writable_segment_is_eacces_unless_the_opener_asked_for_that_mode)
{
    srl_config cfg;
    const char *name = guarded_segment(30, "mode", &cfg);
    ck_assert_int_eq(chmod(path_of(name), 0666), 0);
    assert_refused_by_every_opener(name, &cfg, SRL_EACCES, 0, 0666);
    srl_config wide = cfg;
    wide.mode = 0666;
    srl_info info;
    ck_assert_int_eq(open_and_use(name, &wide, 0, &info), 0);
    ck_assert_uint_eq(info.mode, 0666);
    ck_assert_int_eq(open_and_use(name, &wide, SRL_ADOPT, &info), 0);
    /* The allowance is the caller's, never the header's: a header that
     * claims 0666 (resealed, so only the mode rule can decide) widens
     * nothing for an opener without a config. */
    shm_poke32(name, F(mode), 0666);
    reseal(name);
    assert_refused_with_and_without_config(name, &cfg, SRL_EACCES, F(mode), 0666);
    shm_poke32(name, F(mode), 0600);
    reseal(name);
    /* Read permission for others grants no write: accepted at 0600. */
    ck_assert_int_eq(chmod(path_of(name), 0644), 0);
    ck_assert_int_eq(open_and_use(name, &cfg, 0, &info), 0);
    /* A refused open never "fixes" the mode either. */
    struct stat st;
    ck_assert_int_eq(chmod(path_of(name), 0666), 0);
    assert_refused(name, &cfg, 0, SRL_EACCES, 0, 0666);
    ck_assert_int_eq(stat(path_of(name), &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0666);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------ table corruption */

/* A live handle plus the attacker's own mapping of the same file. */
struct victim {
    char name[128];
    srl_limiter *lim;
    struct srl__shm *s;             /* the handle's private geometry */
    unsigned char *m;               /* attacker's MAP_SHARED view */
    size_t bytes;
    fake_clock *clk;
    srl_config cfg;
};

static void victim_open(struct victim *v, srl_algorithm a, uint32_t permits, uint64_t cap,
                        uint32_t kd, int nkeys)
{
    v->clk = fake_clock_shared(1000 * SEC);
    v->cfg = config(a, permits, cap, kd);
    v->cfg.ticker = fake_ticker(v->clk);
    snprintf(v->name, sizeof v->name, "%s", unique_name("table"));
    ck_assert_int_eq(srl_open_shared(v->name, &v->cfg, SRL_CREATE | SRL_EXCL, &v->lim), 0);
    v->s = v->lim->impl;
    v->bytes = v->s->map_bytes;
    int fd = open(path_of(v->name), O_RDWR);
    ck_assert_int_ge(fd, 0);
    v->m = mmap(NULL, v->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(v->m, MAP_FAILED);
    close(fd);
    srl_decision d;
    char key[32];
    for (int i = 0; i < nkeys; i++) {
        int n = snprintf(key, sizeof key, "key-%d", i);
        srl_lease l;   /* a concurrency victim: the unit stays held */
        ck_assert_int_eq(a == SRL_CONCURRENCY ? srl_enter(v->lim, key, (size_t)n, &l, &d)
                                              : srl_acquire(v->lim, key, (size_t)n, 1, &d),
                         0);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_uint_eq(d.flags, 0);
    }
    ck_assert_int_eq(srl_check(v->lim, NULL, NULL), 0);
}

static void victim_close(struct victim *v)
{
    munmap(v->m, v->bytes);
    srl_close(v->lim);
    ck_assert_int_eq(srl_unlink(v->name), 0);
}

static unsigned char *bucket_at(const struct victim *v, uint64_t b)
{
    return v->m + SRL__SHM_HEADER_BYTES + b * v->s->bucket_bytes;
}

static unsigned char *slot_at(const struct victim *v, uint64_t b, unsigned i)
{
    return bucket_at(v, b) + v->s->slots_off + (size_t)i * v->s->slot_bytes;
}

#define BK(v, b, field) (((struct srl__shm_bucket *)bucket_at(v, b))->field)

/* The first occupied slot, as (bucket, slot). */
static void first_used(const struct victim *v, uint64_t *b, unsigned *i)
{
    for (*b = 0; *b < v->s->buckets; (*b)++)
        for (*i = 0; *i < SRL__SHM_SLOTS; (*i)++)
            if (BK(v, *b, tags)[*i] != 0)
                return;
    ck_abort_msg("no occupied slot");
}

static uint16_t *key_len_at(const struct victim *v, uint64_t b, unsigned i)
{
    return (uint16_t *)(slot_at(v, b, i) + v->s->counters_off + SRL__CTR_KEY_LEN);
}

static int entry_ok(const srl_entry *e, void *ctx)
{
    const struct victim *v = ctx;
    ck_assert_uint_le(e->display_len, v->s->key_display);
    ck_assert_uint_le(e->display_len, e->key_len);
    ck_assert_uint_eq(e->now.limit, v->cfg.policy.permits);
    ck_assert(e->now.allowed == 0 || e->now.allowed == 1);
    ck_assert(e->at_rest == 0 || e->at_rest == 1);
    volatile unsigned char sink = 0;
    for (uint32_t i = 0; i < e->display_len; i++)
        sink ^= e->display[i];          /* ASan: the display copy is readable */
    (void)sink;
    return 0;
}

/* Every operation, on many keys, after a corruption: none may crash, hang
 * or fail with anything but its documented "not there" code. */
static void exercise(struct victim *v, uint64_t *seed)
{
    srl_decision d;
    char key[32];
    for (int i = 0; i < 48; i++) {
        int n = snprintf(key, sizeof key, "key-%d", (int)rnd_below(seed, 80));
        int rc;
        if (v->cfg.policy.algorithm == SRL_CONCURRENCY) {
            /* Units of damaged holder tables: entered, and left half the time. */
            srl_lease l;
            rc = srl_enter(v->lim, key, (size_t)n, &l, &d);
            if (rc == 0 && l.gen != 0 && rnd_below(seed, 2) == 0) {
                int lrc = srl_leave(v->lim, &l);
                ck_assert_msg(lrc == 0 || lrc == SRL_ENOENT, "leave %s: rc %d", key, lrc);
            }
        } else {
            rc = srl_acquire(v->lim, key, (size_t)n, 1, &d);
        }
        ck_assert_msg(rc == 0, "acquire %s: rc %d", key, rc);
        ck_assert(d.allowed == 0 || d.allowed == 1);
        ck_assert_uint_eq(d.limit, v->cfg.policy.permits);
        ck_assert_uint_eq(d.flags & ~SRL_DECISION_UNTRACKED, 0);
    }
    for (int i = 0; i < 4; i++) {
        int n = snprintf(key, sizeof key, "key-%d", (int)rnd_below(seed, 80));
        int rc = srl_peek(v->lim, key, (size_t)n, 1, &d);
        ck_assert(rc == 0 || rc == SRL_ENOENT);
    }
    int n = snprintf(key, sizeof key, "key-%d", (int)rnd_below(seed, 80));
    int rc = srl_reset_key(v->lim, key, (size_t)n);
    ck_assert(rc == 0 || rc == SRL_ENOENT);
    ck_assert_int_ge(srl_foreach(v->lim, entry_ok, v), 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(v->lim, &st), 0);
    ck_assert_uint_le(st.used, st.capacity);
    ck_assert_uint_eq(st.capacity, v->s->buckets * SRL__SHM_SLOTS);
    if (rnd_below(seed, 4) == 0)
        ck_assert_int_ge(srl_evict_idle(v->lim), 0);
    v->clk->now += rnd_below(seed, 3) == 0 ? rnd_below(seed, 120 * SEC) : rnd_below(seed, SEC);
}

/* Corruption srl_check is documented to report, counted from the
 * attacker's side: undo/moving markers, tags that disagree with their
 * fingerprint, key lengths out of range.  (Each is one problem line; check
 * may find more, e.g. invalid states or keys outside their buckets.) */
static int64_t visible_damage(const struct victim *v)
{
    int64_t n = 0;
    for (uint64_t b = 0; b < v->s->buckets; b++) {
        n += BK(v, b, undo_slot) != 0;
        n += BK(v, b, moving_slot) != 0;
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
            uint8_t tag = BK(v, b, tags)[i];
            if (tag == 0)
                continue;
            const uint8_t *fp = slot_at(v, b, i);
            n += tag != (fp[0] != 0 ? fp[0] : 1);
            uint16_t len = *key_len_at(v, b, i);
            n += len < 1 || len > SRL_KEY_MAX;
        }
    }
    return n;
}

static const srl_algorithm algos[] = {SRL_TOKEN_BUCKET, SRL_SLIDING_LOG, SRL_SLIDING_COUNTER,
                                      SRL_GCRA, SRL_CONCURRENCY};

/* 3,000 trials per algorithm: 1-4 random writes into the bucket heads and
 * slots (tags, undo_slot, moving_slot, counters, undo area, fingerprints,
 * states, per-key counters, key_len, display), then every operation. */
START_TEST(random_bytes_over_the_table_never_crash_hang_or_read_out_of_bounds)
{
    guard(240);
    struct victim v;
    srl_algorithm a = algos[_i];
    victim_open(&v, a, a == SRL_SLIDING_LOG ? 8 : 100, 64, 8, 40);
    uint64_t seed = 0xbadc0ffee0ddf00dull + (uint64_t)_i;
    const size_t head = offsetof(struct srl__shm_bucket, tags);   /* mutex stays */
    int detected = 0;
    for (int trial = 0; trial < 3000; trial++) {
        int writes = 1 + (int)rnd_below(&seed, 4);
        for (int w = 0; w < writes; w++) {
            uint64_t b = rnd_below(&seed, v.s->buckets);
            unsigned char *bk = bucket_at(&v, b);
            size_t off;
            switch (rnd_below(&seed, 4)) {
            case 0:     /* tags, markers, bucket counters, undo area */
                off = head + rnd_below(&seed, v.s->slots_off - head);
                break;
            case 1:     /* a tag only (most damage comes from there) */
                off = head + rnd_below(&seed, SRL__SHM_SLOTS);
                break;
            default:    /* anywhere in a slot */
                off = v.s->slots_off + rnd_below(&seed, SRL__SHM_SLOTS * v.s->slot_bytes);
                break;
            }
            unsigned char val;
            switch (rnd_below(&seed, 4)) {
            case 0: val = 0; break;
            case 1: val = 0xff; break;
            case 2: val = (unsigned char)(bk[off] + 1); break;
            default: val = (unsigned char)rnd_next(&seed); break;
            }
            if (a == SRL_SLIDING_LOG && off >= v.s->slots_off) {
                /* A sliding-log count above permits is the one value that
                 * stalled a bucket (see the regression test below, which
                 * covers it): here the count word only gets 0..permits. */
                size_t in_slot = (off - v.s->slots_off) % v.s->slot_bytes;
                if (in_slot >= SRL__SLOT_STATE && in_slot < SRL__SLOT_STATE + 4) {
                    size_t start = off - (in_slot - SRL__SLOT_STATE);
                    uint32_t c = (uint32_t)rnd_below(&seed, v.cfg.policy.permits + 1);
                    memcpy(bk + start, &c, 4);
                    continue;
                }
            }
            bk[off] = val;
        }
        int64_t want = visible_damage(&v);
        int64_t found = srl_check(v.lim, NULL, NULL);
        ck_assert_msg(found >= want, "trial %d: check found %lld problems, at least %lld visible",
                      trial, (long long)found, (long long)want);
        detected += found > 0;
        exercise(&v, &seed);
        /* Every so often the attacker stops: a clean table again (tags
         * cleared), so later trials also start from healthy states. */
        if (trial % 100 == 99) {
            for (uint64_t b = 0; b < v.s->buckets; b++) {
                memset(BK(&v, b, tags), 0, SRL__SHM_SLOTS);
                BK(&v, b, undo_slot) = 0;
                BK(&v, b, moving_slot) = 0;
            }
            ck_assert_int_eq(srl_check(v.lim, NULL, NULL), 0);
        }
    }
    ck_assert_int_gt(detected, 100);
    victim_close(&v);
}
END_TEST

/* Layout 7: a slot whose seq is odd with no lock owner (a write cut short
 * that no repair saw, or garbage).  A lock-free handle must neither spin on
 * it nor hang: it gives up after a few reads and takes the lock, and the
 * locked path resets the slot (counted) and makes seq even again. */
START_TEST(an_odd_seq_with_no_lock_owner_sends_a_lock_free_decider_to_the_lock_which_resets_it)
{
    guard(60);
    struct victim v;
    victim_open(&v, SRL_GCRA, 10, 64, 8, 1);
    srl_config cfg = v.cfg;
    cfg.flags = SRL_CONFIG_LOCKFREE;
    srl_limiter *lf = NULL;
    ck_assert_int_eq(srl_open_shared(v.name, &cfg, 0, &lf), 0);
    /* Where there is no 16-byte CAS (cas16.h) the handle is a locked one:
     * the same reset, by the lock it takes first. */
    ck_assert(((struct srl__shm *)lf->impl)->lockfree == srl__cas16_usable());
    uint64_t b;
    unsigned i;
    first_used(&v, &b, &i);
    unsigned char *slot = slot_at(&v, b, i);
    uint16_t seq;
    memcpy(&seq, slot + SRL__SLOT_SEQ, sizeof seq);
    ck_assert_uint_eq(seq & 1u, 0);
    seq |= 1u;
    memcpy(slot + SRL__SLOT_SEQ, &seq, sizeof seq);
    struct check_lines l = {0};
    ck_assert_int_eq(srl_check(v.lim, check_lines_collect, &l), 1);
    ck_assert_ptr_nonnull(strstr(l.last, "sequence word odd"));
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lf, "key-0", 5, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_uint_eq(d.remaining, 9);   /* reset to fresh, then this admission */
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lf, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 1);
    memcpy(&seq, slot + SRL__SLOT_SEQ, sizeof seq);
    ck_assert_uint_eq(seq & 1u, 0);
    ck_assert_int_eq(srl_check(v.lim, NULL, NULL), 0);
    ck_assert_int_eq(srl_acquire(lf, "key-0", 5, 1, &d), 0);   /* lock-free again */
    ck_assert_uint_eq(d.remaining, 8);
    srl_close(lf);
    victim_close(&v);
}
END_TEST

/* One damage at a time, with the exact number of problems srl_check reports. */
START_TEST(srl_check_reports_each_documented_kind_of_table_damage_exactly_once)
{
    guard(60);
    struct victim v;
    victim_open(&v, SRL_TOKEN_BUCKET, 100, 64, 8, 10);
    uint64_t b;
    unsigned i;
    first_used(&v, &b, &i);
    unsigned char *slot = slot_at(&v, b, i);
    uint8_t tag = BK(&v, b, tags)[i];
    uint16_t len = *key_len_at(&v, b, i);
    struct check_lines l;
    struct { uint64_t last, frac; uint32_t tokens, pad; } st, st0;
    memcpy(&st0, slot + SRL__SLOT_STATE, sizeof st0);

#define EXPECT_PROBLEMS(want, what)                                                          \
    do {                                                                                     \
        memset(&l, 0, sizeof l);                                                             \
        int64_t got = srl_check(v.lim, check_lines_collect, &l);                             \
        ck_assert_msg(got == (want) && l.n == (want),                                        \
                      "%s: check found %lld (%d lines), want %d", what, (long long)got, l.n, \
                      (want));                                                               \
    } while (0)

    /* An odd seq (layout 7) with no lock owner: a write cut short that no
     * repair saw; its next user resets the slot. */
    uint16_t seq0;
    memcpy(&seq0, slot + SRL__SLOT_SEQ, sizeof seq0);
    uint16_t odd = (uint16_t)(seq0 | 1u);
    memcpy(slot + SRL__SLOT_SEQ, &odd, sizeof odd);
    EXPECT_PROBLEMS(1, "seq odd");
    ck_assert_ptr_nonnull(strstr(l.last, "sequence word odd"));
    memcpy(slot + SRL__SLOT_SEQ, &seq0, sizeof seq0);
    EXPECT_PROBLEMS(0, "seq restored");

    BK(&v, b, tags)[i] = (uint8_t)(tag == 0xff ? 0xfe : tag + 1);
    EXPECT_PROBLEMS(1, "tag without a matching fingerprint");
    ck_assert_ptr_nonnull(strstr(l.last, "does not match its fingerprint"));
    BK(&v, b, tags)[i] = tag;

    const uint16_t lens[] = {0, SRL_KEY_MAX + 1, UINT16_MAX};
    for (size_t k = 0; k < 3; k++) {
        *key_len_at(&v, b, i) = lens[k];
        EXPECT_PROBLEMS(1, "key_len out of range");
        ck_assert_ptr_nonnull(strstr(l.last, "key length"));
    }
    *key_len_at(&v, b, i) = len;

    const uint8_t marks[] = {1, 16, 17, 255};
    for (size_t k = 0; k < 4; k++) {
        BK(&v, b, undo_slot) = marks[k];
        EXPECT_PROBLEMS(1, "undo_slot set (in or out of range)");
        ck_assert_ptr_nonnull(strstr(l.last, "pending undo"));
        BK(&v, b, undo_slot) = 0;
        BK(&v, b, moving_slot) = marks[k];
        EXPECT_PROBLEMS(1, "moving_slot set (in or out of range)");
        ck_assert_ptr_nonnull(strstr(l.last, "pending relocation"));
        BK(&v, b, moving_slot) = 0;
    }

    st = st0;
    st.tokens = 101;                    /* more tokens than permits */
    memcpy(slot + SRL__SLOT_STATE, &st, sizeof st);
    EXPECT_PROBLEMS(1, "invalid state (tokens > permits)");
    ck_assert_ptr_nonnull(strstr(l.last, "invalid state"));
    st = st0;
    st.pad = 1;
    memcpy(slot + SRL__SLOT_STATE, &st, sizeof st);
    EXPECT_PROBLEMS(1, "invalid state (padding)");
    st = st0;
    st.frac = 60 * SEC;                 /* a fraction of a whole window */
    memcpy(slot + SRL__SLOT_STATE, &st, sizeof st);
    EXPECT_PROBLEMS(1, "invalid state (frac >= window)");
    memcpy(slot + SRL__SLOT_STATE, &st0, sizeof st0);

    /* A duplicate of the key in a free slot of the same bucket. */
    unsigned j = 0;
    while (BK(&v, b, tags)[j] != 0)
        j++;
    ck_assert_uint_lt(j, SRL__SHM_SLOTS);
    memcpy(slot_at(&v, b, j), slot, v.s->slot_bytes);
    BK(&v, b, tags)[j] = tag;
    EXPECT_PROBLEMS(1, "duplicate key in one bucket");
    ck_assert_ptr_nonnull(strstr(l.last, "hold the same key"));
    BK(&v, b, tags)[j] = 0;

    /* A tag on a never-used slot: an all-zero fp has tag 1 and candidate
     * buckets 0 and 1; key_len 0; the zero state is a valid token bucket. */
    unsigned char *free_slot = slot_at(&v, b, j);
    memset(free_slot, 0, v.s->slot_bytes);
    BK(&v, b, tags)[j] = 0x77;
    int expect = 2 + (b > 1);
    EXPECT_PROBLEMS(expect, "tag on an empty slot");
    BK(&v, b, tags)[j] = 0;

    /* A fingerprint rewritten to point at other buckets (same tag). */
    uint8_t fp0[16];
    memcpy(fp0, slot, 16);
    uint64_t c1 = b, c2 = b;
    /* fastrange takes the top bits of each half: fp[7] and fp[15] move the
     * candidate buckets; fp[0] (the tag) stays. */
    for (int t = 0; t < 256 && (c1 == b || c2 == b); t++) {
        slot[7] = (uint8_t)t;
        slot[15] = (uint8_t)(t * 91 + 3);
        srl__shm_fp_buckets(v.s, slot, &c1, &c2);
    }
    ck_assert(c1 != b && c2 != b);
    EXPECT_PROBLEMS(1, "key outside its candidate buckets");
    ck_assert_ptr_nonnull(strstr(l.last, "not in one of its buckets"));
    memcpy(slot, fp0, 16);

    /* Tolerated: statistics, the display, the undo area, a cleared tag. */
    struct srl__shm_bucket *hb = (struct srl__shm_bucket *)bucket_at(&v, b);
    hb->allowed = UINT64_MAX;
    hb->denied = UINT64_MAX;
    hb->full = UINT32_MAX;
    hb->gen = 0xdeadbeefu;   /* layout 6: only ever compared, never trusted */
    hb->evicted = UINT64_MAX;
    hb->would_deny = UINT32_MAX;
    hb->reset_slots = UINT32_MAX;
    hb->timeouts = UINT32_MAX;
    memset(slot + v.s->counters_off, 0xff, 8);
    memset(slot + v.s->counters_off + SRL__CTR_DISPLAY, 0xff, v.s->key_display);
    memset(bucket_at(&v, b) + v.s->undo_off, 0xff, v.s->state_bytes);
    EXPECT_PROBLEMS(0, "statistics, display and undo area");
    srl_stats stats;
    ck_assert_int_eq(srl_stats_get(v.lim, &stats), 0);      /* sums wrap, no trap */
    BK(&v, b, tags)[i] = 0;
    EXPECT_PROBLEMS(0, "a cleared tag (the key is forgotten)");
    uint64_t seed = 42;
    exercise(&v, &seed);
    victim_close(&v);
}
END_TEST

/*
 * Regression (was a defect this suite found; fixed by capping the count at
 * permits in src/core/algo_sliding_log.c): a sliding-log state whose `count`
 * exceeds permits (a corrupt
 * segment, or any caller of srl_state_acquire) makes every operation on that
 * key loop up to 2^32 times under the bucket lock: ~13 s at -O2 on the test
 * machine for count = 0xffffffff and permits 10, while every other worker on
 * the bucket times out.  srl_check sees it at once (sl_valid checks count <=
 * permits) but acquire, peek, foreach and evict_idle all call sl_expired().
 * Cause: src/core/algo_sliding_log.c:47, sl_expired() loops `while (i <
 * s->count ...)` trusting the stored count (sl_decide:68-69 and
 * sl_at_rest:103 use it too).  Fix: bound every use by permits, e.g. read
 * `uint32_t count = s->count < p->permits ? s->count : p->permits;` in
 * sl_expired, sl_decide, sl_at_rest and sl_last_ns (sl_at already reduces
 * indices mod permits, so the reads stay in bounds today).
 */
START_TEST(a_sliding_log_count_beyond_permits_does_not_stall_its_bucket)
{
    struct victim v;
    victim_open(&v, SRL_SLIDING_LOG, 10, 64, 0, 1);
    uint64_t b;
    unsigned i;
    first_used(&v, &b, &i);
    uint32_t count = UINT32_MAX;
    memcpy(slot_at(&v, b, i) + SRL__SLOT_STATE, &count, 4);
    ck_assert_int_eq(srl_check(v.lim, NULL, NULL), 1);
    v.clk->now += 2 * 60 * SEC;         /* every stored time has left the window */
    /* Each call below is microseconds of work; the alarm only catches the
     * 2^32-step loop (seconds on any machine). */
    guard(4);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(v.lim, "key-0", 5, 1, &d), 0);
    ck_assert_int_eq(srl_peek(v.lim, "key-0", 5, 1, &d), 0);
    ck_assert_int_ge(srl_foreach(v.lim, entry_ok, &v), 1);
    ck_assert_int_ge(srl_evict_idle(v.lim), 0);
    guard(0);
    victim_close(&v);
}
END_TEST

/*
 * The bucket mutex itself: 300 trials of 1-6 random bytes over the lock
 * state of bucket 0's mutex (glibc's __lock, __count, __owner, __nusers:
 * what a process that holds, held or scribbled on the lock leaves) in a
 * one-bucket table, each in its own process (a garbage mutex may stay on
 * that thread's robust list).  The mutex TYPE (__kind and after) is left
 * alone here: a foreign kind word is refused before locking, see
 * a_bucket_mutex_of_a_foreign_kind_is_ecorrupt_and_reported_never_an_abort.
 * Every call
 * returns: 0, SRL_ETIMEDOUT (a garbage owner never unlocks; bounded by
 * lock_timeout_ms), SRL_ENOTRECOVERABLE, or SRL_ESYS (glibc's EINVAL for a
 * garbage mutex kind; see the report: srl_acquire does not list ESYS), with
 * a DEGRADED decision; and srl_check reports a lock it could not take.
 */
START_TEST(random_bytes_over_a_bucket_mutex_give_a_bounded_error_never_a_crash_or_a_hang)
{
    guard(200);
    int seen_ok = 0, seen_err = 0;
    for (int trial = 0; trial < 300; trial++) {
        pid_t pid = test_fork();
        if (pid == 0) {
            guard(10);
            uint64_t seed = 0x3017e8ull + (uint64_t)trial;
            srl_config cfg = config(SRL_TOKEN_BUCKET, 100, 16, 0);
            cfg.lock_timeout_ms = 50;
            char name[128];
            snprintf(name, sizeof name, "%s", unique_name("mutex"));
            srl_limiter *lim;
            if (srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim) != 0)
                _exit(101);
            srl_unlink(name);
            int fd = open(path_of(name), O_RDWR);   /* gone: use the handle's own view */
            if (fd >= 0)
                _exit(102);
            struct srl__shm *s = lim->impl;
            unsigned char *mu = (unsigned char *)srl__shm_bucket(s, 0);
            int n = 1 + (int)rnd_below(&seed, 6);
            const size_t state_bytes = offsetof(pthread_mutex_t, __data.__kind);
            for (int k = 0; k < n; k++)
                mu[rnd_below(&seed, state_bytes)] =
                    rnd_below(&seed, 3) == 0 ? 0xff : (unsigned char)rnd_next(&seed);
            int failed = 0;
            for (int i = 0; i < 5; i++) {
                char key[16];
                int kn = snprintf(key, sizeof key, "k%d", i);
                srl_decision d;
                memset(&d, 0, sizeof d);
                int rc = srl_acquire(lim, key, (size_t)kn, 1, &d);
                if (rc != 0 && rc != SRL_ETIMEDOUT && rc != SRL_ENOTRECOVERABLE && rc != SRL_ESYS)
                    _exit(103);
                if (rc != 0 && !(d.flags & SRL_DECISION_DEGRADED))
                    _exit(104);
                failed |= rc != 0;
            }
            srl_stats st;
            if (srl_stats_get(lim, &st) != 0)
                _exit(105);
            int64_t problems = srl_check(lim, NULL, NULL);
            if (problems < 0 || (failed && problems == 0))
                _exit(106);
            if (srl_evict_idle(lim) < 0)
                _exit(107);
            _exit(failed ? 1 : 0);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "trial %d: killed by signal %d", trial,
                      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        ck_assert_msg(WEXITSTATUS(status) <= 1, "trial %d: child failed with %d", trial,
                      WEXITSTATUS(status));
        seen_ok += WEXITSTATUS(status) == 0;
        seen_err += WEXITSTATUS(status) == 1;
    }
    /* Both kinds happened: some garbage is harmless, some breaks the lock. */
    ck_assert_int_gt(seen_ok, 0);
    ck_assert_int_gt(seen_err, 0);
}
END_TEST

/*
 * Issue 10 item 2: the mutex TYPE word (glibc's __kind) of one bucket set to
 * a kind glibc asserts on: 0xb0 (robust + priority-inheritance + shared:
 * pthread_mutex_timedlock.c) and 0xc0 (priority-protect + shared: tpp.c).
 * Before the kind check every locker of that bucket aborted.  Now every
 * call that needs that bucket gets SRL_ECORRUPT (a decision with the
 * DEGRADED flag from on_full), other buckets work as before, srl_check
 * names the bucket and both words without locking it, and writing the
 * right word back heals it.  Loop index: 0 is 0xb0, 1 is 0xc0.
 */
START_TEST(a_bucket_mutex_of_a_foreign_kind_is_ecorrupt_and_reported_never_an_abort)
{
    const int bad = _i == 0 ? 0xb0 : 0xc0;
    guard(60);
    struct victim v;
    victim_open(&v, SRL_TOKEN_BUCKET, 100, 64, 8, 20);
    pthread_mutex_t own;
    ck_assert_int_eq(srl__shm_mutex_init(&own), 0);
    const int good = own.__data.__kind;
    pthread_mutex_destroy(&own);
    ck_assert_int_ne(good, bad);

    /* key-0's bucket gets the bad kind; some key living elsewhere stays. */
    struct srl__shm_key k;
    srl__shm_hash(v.s, "key-0", 5, &k);
    uint64_t b = srl__shm_find_locked(v.s, k.b1, &k) >= 0 ? k.b1 : k.b2;
    ck_assert_int_ge(srl__shm_find_locked(v.s, b, &k), 0);
    char other[32] = "";
    size_t olen = 0;
    for (int n = 1; n < 20 && olen == 0; n++) {
        char key[32];
        size_t len = (size_t)snprintf(key, sizeof key, "key-%d", n);
        srl__shm_hash(v.s, key, len, &k);
        if (k.b1 != b && k.b2 != b) {
            memcpy(other, key, len + 1);
            olen = len;
        }
    }
    ck_assert_uint_gt(olen, 0);
    int *kind = (int *)(bucket_at(&v, b) + offsetof(pthread_mutex_t, __data.__kind));
    ck_assert_int_eq(*kind, good);
    *kind = bad;

    srl_decision d;
    memset(&d, 0, sizeof d);
    ck_assert_int_eq(srl_acquire(v.lim, "key-0", 5, 1, &d), SRL_ECORRUPT);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(d.allowed, 1);                 /* on_full: allow (default) */
    memset(&d, 0, sizeof d);
    ck_assert_int_eq(srl_peek(v.lim, "key-0", 5, 1, &d), SRL_ECORRUPT);
    ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
    ck_assert_int_eq(srl_reset_key(v.lim, "key-0", 5), SRL_ECORRUPT);
    ck_assert_int_eq(srl_foreach(v.lim, entry_ok, &v), SRL_ECORRUPT);
    ck_assert_int_eq(srl_evict_idle(v.lim), 0);     /* skips it, sweeps the rest */
    /* The other buckets are unaffected. */
    ck_assert_int_eq(srl_acquire(v.lim, other, olen, 1, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(d.allowed, 1);

    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(srl_check(v.lim, check_lines_collect, &l), 1);
    ck_assert_int_eq(l.n, 1);
    char want[128];
    snprintf(want, sizeof want, "bucket %llu: mutex kind 0x%x is not srl's (expected 0x%x)",
             (unsigned long long)b, (unsigned)bad, (unsigned)good);
    ck_assert_str_eq(l.last, want);
    ck_assert_int_eq(*kind, bad);                   /* check wrote nothing */

    *kind = good;
    ck_assert_int_eq(srl_check(v.lim, NULL, NULL), 0);
    ck_assert_int_eq(srl_acquire(v.lim, "key-0", 5, 1, &d), 0);
    ck_assert_uint_eq(d.flags, 0);
    ck_assert_int_eq(d.remaining, 98);              /* its state was kept: 2 of 100 used */
    victim_close(&v);
}
END_TEST

/* The same kinds planted in the file before anyone opened it, in every
 * bucket: opening works (nothing locks at open), every request is
 * SRL_ECORRUPT with DEGRADED, srl_check reports each bucket once. */
START_TEST(a_segment_planted_with_foreign_mutex_kinds_degrades_every_request_and_is_reported)
{
    const int bad = _i == 0 ? 0xb0 : 0xc0;
    guard(60);
    srl_config cfg = config(SRL_TOKEN_BUCKET, 100, 64, 0);
    cfg.on_full = SRL_ON_FULL_DENY;
    const char *name = make_segment("table", &cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), 0);
    const struct srl__shm *s = lim->impl;
    const uint64_t buckets = s->buckets;
    ck_assert_uint_eq(buckets, 4);
    for (uint64_t b = 0; b < buckets; b++)
        shm_poke32(name, SRL__SHM_HEADER_BYTES + b * s->bucket_bytes +
                         offsetof(pthread_mutex_t, __data.__kind),
               (uint32_t)bad);
    srl_close(lim);
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), 0);
    for (int n = 0; n < 10; n++) {
        char key[32];
        size_t len = (size_t)snprintf(key, sizeof key, "k%d", n);
        srl_decision d;
        memset(&d, 0, sizeof d);
        ck_assert_int_eq(srl_acquire(lim, key, len, 1, &d), SRL_ECORRUPT);
        ck_assert_uint_eq(d.flags, SRL_DECISION_DEGRADED);
        ck_assert_int_eq(d.allowed, 0);             /* on_full: deny */
    }
    struct check_lines l;
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(srl_check(lim, check_lines_collect, &l), (int64_t)buckets);
    ck_assert_int_eq(l.n, (int)buckets);
    ck_assert_ptr_nonnull(strstr(l.last, "bucket 3: mutex kind 0x"));
    ck_assert_ptr_nonnull(strstr(l.last, "is not srl's (expected 0x"));
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.used, 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* A header rewritten under a live handle: the handle keeps using its
 * private geometry (no out-of-bounds access) and srl_check says so. */
/* The header page after the header: the live counters (struct srl__shm_live,
 * written after READY, so outside the checksum) and the unused rest.  Any
 * bytes there are read as a hint at most: the open, the decisions and
 * srl_check are unaffected, and srl_stats.reclaimed and .recovered (moved
 * there in layout 5) report what is there.  Not policy_gen and its pad
 * (layout 6): they name the policy copy in use, and garbage there is
 * refused (tests/check_shm_live.c, garbage_in_policy_gen_...). */
START_TEST(bytes_after_the_header_are_hints_never_trusted)
{
    guard(60);
    srl_config cfg = config(SRL_TOKEN_BUCKET, 3, 64, 0);
    const char *name = make_segment("live", &cfg);
    unsigned char junk[SRL__SHM_PAGE_BYTES - sizeof(struct srl__shm_header)];
    memset(junk, 0xff, sizeof junk);
    size_t gen_at = SRL__SHM_LIVE_OFFSET + offsetof(struct srl__shm_live, policy_gen) -
                    sizeof(struct srl__shm_header);
    memset(junk + gen_at, 0, 2 * sizeof(uint32_t));   /* policy_gen 0, lf_open 0 */
    size_t damage_at = SRL__SHM_LIVE_OFFSET + offsetof(struct srl__shm_live, policy_damage) -
                       sizeof(struct srl__shm_header);
    memset(junk + damage_at, 0, sizeof(uint32_t));    /* no damage counted (else reported) */
    shm_poke(name, sizeof(struct srl__shm_header), junk, sizeof junk);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), 0);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.reclaimed, UINT64_MAX);   /* shown as found, nothing derived */
    ck_assert_uint_eq(st.recovered, UINT64_MAX);
    srl_decision d;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
        ck_assert_int_eq(d.allowed, 1);
    }
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(srl_check(lim, NULL, NULL), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_header_rewritten_under_a_live_handle_is_reported_and_never_followed)
{
    guard(60);
    struct victim v;
    victim_open(&v, SRL_TOKEN_BUCKET, 100, 64, 8, 20);
    struct srl__shm_header *h = (struct srl__shm_header *)v.m;
    struct srl__shm_header orig = *h;
    uint64_t seed = 7;
    h->buckets = 1ull << 40;
    h->capacity = 1ull << 44;
    h->total_bytes = UINT64_MAX;
    h->bucket_bytes = UINT32_MAX;
    h->slot_bytes = UINT32_MAX;
    h->state_bytes = UINT32_MAX;
    h->key_display = UINT32_MAX;
    ck_assert_int_eq(srl_check(v.lim, NULL, NULL), 2);      /* geometry changed, checksum */
    exercise(&v, &seed);
    *h = orig;
    memset(h->magic, 0, 8);
    h->version = 99;
    h->state = 77;
    ck_assert_int_eq(srl_check(v.lim, NULL, NULL), 4);      /* magic, version, state, checksum */
    exercise(&v, &seed);
    *h = orig;
    ck_assert_int_eq(srl_check(v.lim, NULL, NULL), 0);
    victim_close(&v);
}
END_TEST

/* ------------------------------------------------ the policy parser */

static const char *const words[] = {
    "token_bucket", "sliding_log", "sliding_counter", "gcra", "token_bucke", "gcraa", "GCRA",
    "", ":", "/", "ns", "us", "ms", "s", "m", "h", "d", "sec", "M", "D", "mss", " ", "-", "+",
    "0", "00", "1", "10", "4096", "4097", "4294967295", "4294967296", "18446744073709551615",
    "18446744073709551616", "99999999999999999999999", "3660", "86400", "\xff", "\t", "%s%n",
};

static void gen(uint64_t *seed, char *buf, size_t cap)
{
    size_t n = 0;
    int shape = (int)rnd_below(seed, 10);
    if (shape < 5) {
        /* Grammar-ish: [algo:]digits/[digits]unit with mutations. */
        const char *algo = rnd_below(seed, 3) ? words[rnd_below(seed, 7)] : NULL;
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", algo ? algo : "", algo ? ":" : "");
        n += (size_t)snprintf(buf + n, cap - n, "%llu/",
                              (unsigned long long)(rnd_below(seed, 2) ? rnd_below(seed, 5000)
                                                                      : rnd_next(seed) >> rnd_below(seed, 64)));
        if (rnd_below(seed, 2))
            n += (size_t)snprintf(buf + n, cap - n, "%llu",
                                  (unsigned long long)(rnd_below(seed, 2) ? rnd_below(seed, 1000)
                                                                          : rnd_next(seed) >> rnd_below(seed, 64)));
        n += (size_t)snprintf(buf + n, cap - n, "%s", words[10 + rnd_below(seed, 12)]);
        if (rnd_below(seed, 4) == 0 && n > 0)   /* one mutation */
            buf[rnd_below(seed, n)] = (char)(1 + rnd_below(seed, 255));
    } else if (shape < 8) {
        /* A sequence of tokens. */
        int k = (int)rnd_below(seed, 12);
        for (int t = 0; t < k && n + 32 < cap; t++)
            n += (size_t)snprintf(buf + n, cap - n, "%s",
                                  words[rnd_below(seed, sizeof words / sizeof words[0])]);
    } else if (shape == 8) {
        /* Garbage bytes (no NUL). */
        size_t k = rnd_below(seed, 64);
        for (size_t t = 0; t < k; t++)
            buf[n++] = (char)(1 + rnd_below(seed, 255));
        buf[n] = '\0';
    } else {
        /* Very long: a long run of digits or of tokens. */
        size_t k = 1000 + rnd_below(seed, cap - 1100);
        const char *prefix = rnd_below(seed, 2) ? "gcra:" : "";
        n += (size_t)snprintf(buf + n, cap - n, "%s", prefix);
        char fill = rnd_below(seed, 2) ? '9' : (char)('0' + rnd_below(seed, 10));
        while (n < k)
            buf[n++] = rnd_below(seed, 50) ? fill : '/';
        buf[n] = '\0';
        if (rnd_below(seed, 2))
            snprintf(buf + n, cap - n, "/1s");
    }
    buf[cap - 1] = '\0';
}

START_TEST(the_policy_parser_survives_100000_random_texts_and_round_trips_what_it_accepts)
{
    guard(120);
    static char buf[16384];
    uint64_t seed = 0x9a75e5eedull;
    int accepted = 0;
    for (int trial = 0; trial < 100000; trial++) {
        gen(&seed, buf, sizeof buf);
        srl_policy p;
        memset(&p, 0xab, sizeof p);
        srl_policy untouched = p;
        int rc = srl_policy_parse(buf, &p);
        if (rc != 0) {
            ck_assert_msg(rc == SRL_EPOLICY, "\"%.80s\": rc %d", buf, rc);
            ck_assert(memcmp(&p, &untouched, sizeof p) == 0);      /* *out only on success */
            continue;
        }
        accepted++;
        ck_assert_int_eq(srl_policy_validate(&p), 0);
        char text[SRL_POLICY_TEXT_MAX];
        int n = srl_policy_format(&p, text, sizeof text);
        ck_assert_msg(n > 0 && (size_t)n == strlen(text), "format of \"%.80s\": %d", buf, n);
        srl_policy q;
        ck_assert_int_eq(srl_policy_parse(text, &q), 0);
        ck_assert_msg(q.algorithm == p.algorithm && q.permits == p.permits &&
                          q.window_ns == p.window_ns,
                      "\"%.80s\" -> \"%s\" parses back differently", buf, text);
        char again[SRL_POLICY_TEXT_MAX];
        ck_assert_int_eq(srl_policy_format(&q, again, sizeof again), n);
        ck_assert_str_eq(again, text);
    }
    /* The generator reaches the accepting paths often, not by luck. */
    ck_assert_int_gt(accepted, 2000);
    ck_assert_int_lt(accepted, 100000);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *suite(void)
{
    Suite *s = suite_create("shm_hostile");
    TCase *tc = tcase_create("hostile");
    tcase_set_timeout(tc, 250);
    tcase_add_test(tc, every_header_byte_set_to_a_bad_value_is_refused_with_its_code_or_provably_ignored);
    tcase_add_test(tc, header_fields_that_lie_together_are_corrupt_unless_the_file_really_holds_them);
    tcase_add_test(tc, a_truncated_segment_is_refused_at_every_interesting_size_without_sigbus);
    tcase_add_test(tc, an_unfinished_truncated_segment_is_stale_or_timed_out_by_its_creators_life);
    tcase_add_test(tc, a_segment_shrunk_after_it_was_opened_is_refused_by_every_later_open);
    tcase_add_test(tc, a_creator_is_dead_when_its_pid_was_reused_and_unknown_in_another_pid_namespace);
    tcase_add_test(tc, a_strangers_unfinished_segment_is_eacces_before_any_wait);
    tcase_add_test(tc, a_segment_truncated_under_a_live_handle_is_reported_by_check_and_info);
    tcase_add_test(tc, segment_names_follow_one_rule_everywhere);
    tcase_add_test(tc, a_directory_at_the_name_is_refused_and_left_alone);
    tcase_add_test(tc, a_fifo_or_a_device_node_at_the_name_is_foreign_not_stale);
    tcase_add_test(tc, a_symlink_at_the_name_is_never_followed_to_open_create_or_clobber_its_target);
    tcase_add_test(tc, another_users_segment_is_eacces_for_every_opener_root_included_unless_its_owner_is_named);
    tcase_add_test(tc, a_world_writable_segment_is_eacces_unless_the_opener_asked_for_that_mode);
    tcase_add_loop_test(tc, random_bytes_over_the_table_never_crash_hang_or_read_out_of_bounds, 0, 5);
    tcase_add_test(tc, bytes_after_the_header_are_hints_never_trusted);
    tcase_add_test(tc, srl_check_reports_each_documented_kind_of_table_damage_exactly_once);
    tcase_add_test(tc, an_odd_seq_with_no_lock_owner_sends_a_lock_free_decider_to_the_lock_which_resets_it);
    tcase_add_test(tc, a_sliding_log_count_beyond_permits_does_not_stall_its_bucket);
    tcase_add_test(tc, random_bytes_over_a_bucket_mutex_give_a_bounded_error_never_a_crash_or_a_hang);
    tcase_add_loop_test(tc, a_bucket_mutex_of_a_foreign_kind_is_ecorrupt_and_reported_never_an_abort, 0, 2);
    tcase_add_loop_test(tc, a_segment_planted_with_foreign_mutex_kinds_degrades_every_request_and_is_reported, 0, 2);
    tcase_add_test(tc, a_header_rewritten_under_a_live_handle_is_reported_and_never_followed);
    tcase_add_test(tc, the_policy_parser_survives_100000_random_texts_and_round_trips_what_it_accepts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"hdr", "lie", "trunc", "unfin", "shrink", "dir", "fifo",
                                       "link", "owner", "mode", "table", "mutex"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
