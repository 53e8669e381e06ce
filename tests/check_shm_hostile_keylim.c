/*
 * check_shm_hostile_keylim.c - the key-limits table and a slot's OWN and
 * CALL flags (layout 9) are untrusted input like every byte of a segment.
 *
 * An attacker's own MAP_SHARED view of a live segment writes into the
 * key-limits entries and the tier word of a key decided by its own
 * limits; a handle opened afterwards (its cache of resolved entries is
 * empty, so it reads what the attacker wrote) then decides, walks, checks
 * and evicts.  Asserted:
 *   - each documented kind of damage (an entry's sum, an entry whose sum
 *     holds but whose state is larger than the slots, an entry in a state
 *     that is not READY, a slot with both OWN and CALL, a slot naming a
 *     FREE entry) is reported by srl_check in one line, and the key's next
 *     decision is its tier's (limit 100), the slot reset and counted in
 *     srl_stats.reset_slots exactly once;
 *   - 2,000 rounds of random bytes over the table and the flag bits never
 *     crash, hang or read out of bounds (the ASan build), and every call
 *     answers with a documented code.
 * Every test runs in Check's fork mode under an alarm() guard.  One
 * process per test: the damage is arranged, not raced.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "testutil.h"
#include "shm_testutil.h"

static void guard(unsigned seconds)
{
    signal(SIGALRM, SIG_DFL);
    alarm(seconds);
}

static srl_limits limits(const char *text)
{
    srl_limits l;
    ck_assert_int_eq(srl_limits_parse_ex(text, &l, NULL), 0);
    return l;
}

struct victim {
    char name[128];
    srl_limiter *lim;               /* the creator's handle */
    struct srl__shm *s;
    unsigned char *m;               /* the attacker's view */
    size_t bytes;
    fake_clock *clk;
    srl_config cfg;
};

/* A segment of token_bucket:100/1h whose one key "k" has stored limits
 * token_bucket:3/1h (entry 0) and one use of them. */
static void victim_open(struct victim *v)
{
    v->clk = fake_clock_shared(1000 * SEC);
    srl_config_init(&v->cfg);
    ck_assert_int_eq(srl_policy_parse("token_bucket:100/1h", &v->cfg.policy), 0);
    v->cfg.capacity = 64;
    v->cfg.ticker = fake_ticker(v->clk);
    snprintf(v->name, sizeof v->name, "%s", unique_name("hkeylim"));
    ck_assert_int_eq(srl_open_shared(v->name, &v->cfg, SRL_CREATE | SRL_EXCL, &v->lim), 0);
    v->s = v->lim->impl;
    v->bytes = v->s->map_bytes;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm%s", v->name);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    v->m = mmap(NULL, v->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(v->m, MAP_FAILED);
    close(fd);
    srl_limits l3 = limits("token_bucket:3/1h");
    ck_assert_int_eq(srl_key_set_limits(v->lim, "k", 1, &l3), 0);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(v->lim, "k", 1, 1, &d), 0);
    ck_assert_uint_eq(d.limit, 3);
    ck_assert_int_eq(srl_check(v->lim, NULL, NULL), 0);
}

static void victim_close(struct victim *v)
{
    munmap(v->m, v->bytes);
    srl_close(v->lim);
    ck_assert_int_eq(srl_unlink(v->name), 0);
}

static struct srl__shm_keylim *entry_at(const struct victim *v, unsigned r)
{
    return (struct srl__shm_keylim *)(v->m + v->bytes - SRL__SHM_OP_BYTES) + r;
}

/* The tier word of the one key's slot. */
static uint16_t *tierword_at(const struct victim *v)
{
    for (uint64_t b = 0; b < v->s->buckets; b++) {
        unsigned char *bk = v->m + SRL__SHM_HEADER_BYTES + b * v->s->bucket_bytes;
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
            if (((struct srl__shm_bucket *)bk)->tags[i] != 0)
                return (uint16_t *)(bk + v->s->slots_off + (size_t)i * v->s->slot_bytes +
                                    SRL__SLOT_TIER);
    }
    ck_abort_msg("no occupied slot");
    return NULL;
}

/* Seal a forged entry as shm_keylim.c seals a real one. */
static void reseal(struct srl__shm_keylim *e)
{
    e->sum = srl__shm_keylim_sum(e);
}

enum { SUM, TOO_BIG, NOT_READY, BOTH_FLAGS, FREE_ENTRY, KINDS };
static const char *const want_line[KINDS] = {
    "key-limits entry 0 is not a valid limit set",
    "key-limits entry 0 is not a valid limit set",
    "key-limits entry 0 is not a valid limit set",
    "has both OWN and CALL",
    "key-limits entry 200 is not a valid limit set",
};

START_TEST(each_kind_of_key_limits_damage_is_reported_and_reset_once)
{
    guard(60);
    struct victim v;
    victim_open(&v);
    switch (_i) {
    case SUM:
        entry_at(&v, 0)->sum ^= 1;
        break;
    case TOO_BIG: {   /* sealed right, but a state the slots cannot hold */
        struct srl__shm_keylim *e = entry_at(&v, 0);
        e->limits = limits("sliding_log:50/1m");
        e->state_bytes = 408;
        reseal(e);
        break;
    }
    case NOT_READY:
        entry_at(&v, 0)->state = 7;
        break;
    case BOTH_FLAGS:
        *tierword_at(&v) |= SRL__SLOT_F_CALL;
        break;
    default:
        *tierword_at(&v) = (uint16_t)(SRL__SLOT_F_OWN | 200u);
        break;
    }
    /* A handle opened now has resolved nothing yet: it reads the damage. */
    srl_limiter *h;
    ck_assert_int_eq(srl_open_shared(v.name, &v.cfg, 0, &h), 0);
    struct check_lines lines = {0};
    ck_assert_int_eq(srl_check(h, check_lines_collect, &lines), 1);
    ck_assert_msg(strstr(lines.last, want_line[_i]) != NULL, "line: %s", lines.last);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(h, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.limit, 100);   /* its tier decides it now */
    ck_assert_uint_eq(d.remaining, 99);   /* a fresh state: the damage took its use */
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(h, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 1);
    srl_key_control kc;
    ck_assert_int_eq(srl_key_control_get(h, "k", 1, &kc), 0);
    ck_assert_uint_eq(kc.flags, 0);
    ck_assert_int_eq(srl_acquire(h, "k", 1, 1, &d), 0);
    ck_assert_int_eq(srl_stats_get(h, &st), 0);
    ck_assert_uint_eq(st.reset_slots, 1);   /* once */
    ck_assert_int_eq(srl_check(h, NULL, NULL), 0);
    srl_close(h);
    victim_close(&v);
}
END_TEST

static uint64_t rnd_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static int walk_ok(const srl_entry *e, void *ctx)
{
    (void)ctx;
    ck_assert(e->now.allowed == 0 || e->now.allowed == 1);
    return 0;
}

START_TEST(random_bytes_over_the_key_limits_table_and_flags_never_crash_or_hang)
{
    guard(240);
    struct victim v;
    victim_open(&v);
    srl_limits l10 = limits("token_bucket:10/1h");
    srl_decision d;
    ck_assert_int_eq(srl_acquire_limits(v.lim, "c", 1, &l10, 1, &d), 0);   /* entry 1, CALL */
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    size_t table = SRL__SHM_KEYLIMS * sizeof(struct srl__shm_keylim);
    for (int round = 0; round < 2000; round++) {
        int writes = 1 + (int)(rnd_next(&seed) % 4);
        for (int w = 0; w < writes; w++) {
            uint64_t x = rnd_next(&seed);
            if (x % 5 == 0) {   /* the flag byte of the key's tier word */
                *tierword_at(&v) = (uint16_t)(rnd_next(&seed) & 0xffffu);
            } else {            /* mostly the first entries, where the keys point */
                size_t span = x % 3 == 0 ? table : 2 * sizeof(struct srl__shm_keylim);
                v.m[v.bytes - SRL__SHM_OP_BYTES + rnd_next(&seed) % span] =
                    (unsigned char)rnd_next(&seed);
            }
        }
        if (round % 7 == 0)   /* sometimes a forged entry that is sealed right */
            reseal(entry_at(&v, (unsigned)(rnd_next(&seed) % 2)));
        srl_limiter *h;
        ck_assert_int_eq(srl_open_shared(v.name, &v.cfg, 0, &h), 0);
        static const char *keys[] = {"k", "c", "n"};
        for (int k = 0; k < 3; k++) {
            int rc = srl_acquire(h, keys[k], 1, 1, &d);
            ck_assert_msg(rc == 0, "acquire %s: rc %d", keys[k], rc);
            ck_assert(d.allowed == 0 || d.allowed == 1);
            rc = srl_acquire_limits(h, keys[k], 1, &l10, 1, &d);
            ck_assert_msg(rc == 0 || rc == SRL_ENOSPC, "acquire_limits %s: rc %d", keys[k], rc);
            srl_limits got;
            rc = srl_key_get_limits(h, keys[k], 1, &got);
            ck_assert(rc == 0 || rc == SRL_ENOENT);
            if (rc == 0)
                ck_assert_int_eq(srl_limits_validate(&got), 0);
            srl_key_control kc;
            ck_assert_int_eq(srl_key_control_get(h, keys[k], 1, &kc), 0);
        }
        ck_assert_int_ge(srl_foreach(h, walk_ok, NULL), 0);
        ck_assert_int_ge(srl_check(h, NULL, NULL), 0);
        ck_assert_int_ge(srl_evict_idle(h), 0);
        srl_close(h);
        v.clk->now += SEC;
    }
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(v.lim, &st), 0);
    ck_assert_uint_gt(st.reset_slots, 0);   /* the damage was met, and counted */
    victim_close(&v);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shm_hostile_keylim");
    TCase *tc = tcase_create("keylim");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, each_kind_of_key_limits_damage_is_reported_and_reset_once, 0, KINDS);
    tcase_add_test(tc, random_bytes_over_the_key_limits_table_and_flags_never_crash_or_hang);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"hkeylim"};
    shm_sweep_leftovers(tags, 1);
    return failed == 0 ? 0 : 1;
}
