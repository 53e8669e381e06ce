/*
 * check_limiter.c - the facade's contract, identical for every store.
 *
 * Each test runs against the anonymous shared store and the local store
 * (a loop test over `kinds`), so a store that forgets a check is caught.
 */
#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cas16.h"
#include "srl.h"
#include "testutil.h"

static srl_limiter *open_kind(int kind, uint32_t permits, fake_clock *clk)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = permits, .window_ns = 1 * SEC};
    cfg.capacity = 64;
    cfg.ticker = fake_ticker(clk);
    srl_limiter *lim = NULL;
    int rc = kind == 0 ? srl_open_anonymous(&cfg, &lim) : srl_open_local(&cfg, &lim);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(lim);
    return lim;
}

START_TEST(empty_and_oversized_keys_are_rejected_with_ekey_and_change_nothing)
{
    fake_clock *clk = fake_clock_shared(0);
    srl_limiter *lim = open_kind(_i, 5, clk);
    srl_decision d = {.allowed = 42};
    char *big = malloc(SRL_KEY_MAX + 1);
    memset(big, 'k', SRL_KEY_MAX + 1);

    ck_assert_int_eq(srl_acquire(lim, "", 0, 1, &d), SRL_EKEY);
    ck_assert_int_eq(srl_acquire(lim, big, SRL_KEY_MAX + 1, 1, &d), SRL_EKEY);
    ck_assert_int_eq(d.allowed, 42); /* untouched on error */
    ck_assert_int_eq(srl_peek(lim, "", 0, 1, &d), SRL_EKEY);
    ck_assert_int_eq(srl_reset_key(lim, big, SRL_KEY_MAX + 1), SRL_EKEY);

    /* the longest allowed key works, and nothing was tracked by the failures */
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.used, 0);
    ck_assert_int_eq(srl_acquire(lim, big, SRL_KEY_MAX, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 4);
    free(big);
    srl_close(lim);
}
END_TEST

START_TEST(cost_zero_or_above_the_limit_is_ecost_and_takes_nothing)
{
    fake_clock *clk = fake_clock_shared(0);
    srl_limiter *lim = open_kind(_i, 5, clk);
    srl_decision d;
    char why[256];
    ck_assert_int_eq(srl_acquire(lim, "alice", 5, 0, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 0: a request costs 1 or more");
    /* A C caller learns the cost and the permits, as PHP, Python and
     * rlctl say them (issue 39). */
    ck_assert_int_eq(srl_acquire(lim, "alice", 5, 6, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 6: 'token_bucket:5/1s' allows 5 at most");
    ck_assert_int_eq(srl_refund(lim, "alice", 5, 7), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 7: 'token_bucket:5/1s' allows 5 at most");
    ck_assert_int_eq(srl_reserve(lim, "alice", 5, 8, SEC, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 8: 'token_bucket:5/1s' allows 5 at most");
    ck_assert_int_eq(srl_acquire(lim, "alice", 5, 5, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 0);
    srl_close(lim);
}
END_TEST

START_TEST(null_arguments_are_einval)
{
    fake_clock *clk = fake_clock_shared(0);
    srl_limiter *lim = open_kind(_i, 5, clk);
    srl_decision d;
    srl_stats st;
    srl_info info;
    ck_assert_int_eq(srl_acquire(NULL, "a", 1, 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_acquire(lim, "a", 1, 1, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_acquire(lim, NULL, 1, 1, &d), SRL_EINVAL);
    ck_assert_int_eq(srl_stats_get(lim, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_stats_get(NULL, &st), SRL_EINVAL);
    ck_assert_int_eq(srl_info_get(NULL, &info), SRL_EINVAL);
    ck_assert_int_eq(srl_foreach(lim, NULL, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_evict_idle(NULL), SRL_EINVAL);
    srl_close(NULL); /* a no-op, not a crash */
    srl_close(lim);
}
END_TEST

START_TEST(reset_and_peek_of_an_untracked_key_are_enoent)
{
    fake_clock *clk = fake_clock_shared(0);
    srl_limiter *lim = open_kind(_i, 5, clk);
    srl_decision d;
    ck_assert_int_eq(srl_peek(lim, "nobody", 6, 1, &d), SRL_ENOENT);
    ck_assert_int_eq(srl_reset_key(lim, "nobody", 6), SRL_ENOENT);
    ck_assert_int_eq(srl_acquire(lim, "alice", 5, 5, &d), 0);
    ck_assert_int_eq(srl_peek(lim, "alice", 5, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_uint_eq(d.retry_after_ns, 200 * MS);
    ck_assert_int_eq(srl_reset_key(lim, "alice", 5), 0);
    ck_assert_int_eq(srl_acquire(lim, "alice", 5, 1, &d), 0);
    ck_assert_uint_eq(d.remaining, 4); /* fresh again after reset */
    srl_close(lim);
}
END_TEST

START_TEST(invalid_configs_are_refused_before_anything_is_made)
{
    srl_config cfg;
    srl_limiter *lim = (srl_limiter *)&cfg;
    srl_config_init(&cfg);
    cfg.policy.permits = 0;
    ck_assert_int_eq(_i == 0 ? srl_open_anonymous(&cfg, &lim) : srl_open_local(&cfg, &lim),
                     SRL_EPOLICY);
    ck_assert_ptr_null(lim);
    srl_config_init(&cfg);
    cfg.capacity = 0;
    ck_assert_int_eq(_i == 0 ? srl_open_anonymous(&cfg, &lim) : srl_open_local(&cfg, &lim),
                     SRL_EINVAL);
    srl_config_init(&cfg);
    cfg.key_display = SRL_KEY_DISPLAY_MAX + 1;
    ck_assert_int_eq(_i == 0 ? srl_open_anonymous(&cfg, &lim) : srl_open_local(&cfg, &lim),
                     SRL_EINVAL);
    ck_assert_int_eq(_i == 0 ? srl_open_anonymous(NULL, &lim) : srl_open_local(NULL, &lim),
                     SRL_EINVAL);
}
END_TEST

START_TEST(every_error_code_has_its_own_message)
{
    for (int a = SRL_ESYS; a <= SRL_OK; a++) {
        ck_assert_ptr_nonnull(srl_strerror(a));
        ck_assert_str_ne(srl_strerror(a), srl_strerror(1));
        for (int b = a + 1; b <= SRL_OK; b++)
            ck_assert_str_ne(srl_strerror(a), srl_strerror(b));
    }
    ck_assert_str_eq(srl_strerror(-1000), "unknown srl error");
}
END_TEST

/* The ABI: each code keeps the number it shipped with, and srl_err_name
 * spells it as srl.h does.  Written out by hand, not from SRL_ERRNO_MAP, so a
 * renumbered or renamed entry in the map fails here. */
START_TEST(every_error_code_keeps_its_number_and_is_named_as_in_srl_h)
{
    static const struct { int code; const char *name; } abi[] = {
        {0, "SRL_OK"}, {-1, "SRL_EINVAL"}, {-2, "SRL_EPOLICY"}, {-3, "SRL_ECOST"},
        {-4, "SRL_EKEY"}, {-5, "SRL_ENOMEM"}, {-6, "SRL_ENOBUFS"}, {-7, "SRL_ENOENT"},
        {-8, "SRL_EEXIST"}, {-9, "SRL_EMISMATCH"}, {-10, "SRL_EFOREIGN"},
        {-11, "SRL_EVERSION"}, {-12, "SRL_ECORRUPT"}, {-13, "SRL_ESTALE"},
        {-14, "SRL_EACCES"}, {-15, "SRL_ENOSPC"}, {-16, "SRL_ETIMEDOUT"},
        {-17, "SRL_ENOTRECOVERABLE"}, {-18, "SRL_ENOTSUP"}, {-19, "SRL_ESYS"},
        {-20, "SRL_ETOOBIG"},
    };
    size_t n = sizeof abi / sizeof abi[0];
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(srl_err_name(abi[i].code));
        ck_assert_str_eq(srl_err_name(abi[i].code), abi[i].name);
    }
    /* The map holds exactly these codes, with these names and messages. */
    size_t in_map = 0;
#define COUNT_AND_CHECK(name, value, msg)                       \
    in_map++;                                                   \
    ck_assert_int_eq(SRL_##name, value);                        \
    ck_assert_int_eq(value, abi[-(value)].code);                \
    ck_assert_str_eq(srl_err_name(value), "SRL_" #name);        \
    ck_assert_str_eq(srl_strerror(value), msg);
    SRL_ERRNO_MAP(COUNT_AND_CHECK)
#undef COUNT_AND_CHECK
    ck_assert_uint_eq(in_map, n);
    ck_assert_int_eq(SRL_ESYS, -19);
    ck_assert_int_eq(SRL_ENOMEM, -5);
    /* Unknown codes: NULL, never a made-up name. */
    ck_assert_ptr_null(srl_err_name(1));
    ck_assert_ptr_null(srl_err_name(-21));
    ck_assert_ptr_null(srl_err_name(-1000));
    ck_assert_ptr_null(srl_err_name(INT_MIN));
    ck_assert_ptr_null(srl_err_name(INT_MAX));
}
END_TEST

START_TEST(check_is_not_supported_on_a_local_limiter_and_healthy_on_a_new_segment)
{
    fake_clock *clk = fake_clock_shared(0);
    srl_limiter *lim = open_kind(_i, 5, clk);
    int64_t n = srl_check(lim, NULL, NULL);
    if (_i == 0)
        ck_assert_int_eq(n, 0);
    else
        ck_assert(n == SRL_ENOTSUP || n == 0);
    srl_close(lim);
}
END_TEST

/* The rule of srl_default_ticker, against the resolution this machine has:
 * coarse exactly when window >= permits * 100 * r. */
START_TEST(default_ticker_is_coarse_only_when_the_emission_interval_is_100_resolutions)
{
    uint64_t r = srl_coarse_resolution_ns();
    ck_assert_uint_gt(r, 0);
    ck_assert_uint_lt(r, SEC);              /* Linux: one timer tick */
    srl_policy at = {.algorithm = SRL_GCRA, .permits = 10, .window_ns = 10 * 100 * r};
    srl_policy below = {.algorithm = SRL_GCRA, .permits = 10, .window_ns = 10 * 100 * r - 1};
    ck_assert_ptr_eq(srl_default_ticker(&at), srl_monotonic_coarse_ns);
    ck_assert_ptr_eq(srl_default_ticker(&below), srl_monotonic_ns);
    srl_policy fast = {.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = SEC};         /* T = 10 ms */
    srl_policy slow = {.algorithm = SRL_TOKEN_BUCKET, .permits = 100, .window_ns = 60 * SEC};    /* T = 600 ms */
    ck_assert_ptr_eq(srl_default_ticker(&fast), r * 100 <= 10 * MS ? srl_monotonic_coarse_ns
                                                                    : srl_monotonic_ns);
    ck_assert_ptr_eq(srl_default_ticker(&slow), r * 100 <= 600 * MS ? srl_monotonic_coarse_ns
                                                                     : srl_monotonic_ns);
    /* permits * 100 r overflowing 64 bits: the precise clock, no wrap */
    srl_policy huge = {.algorithm = SRL_TOKEN_BUCKET, .permits = UINT32_MAX, .window_ns = SRL_WINDOW_MAX_NS};
    ck_assert_ptr_eq(srl_default_ticker(&huge), srl_monotonic_ns);
    srl_policy bad = {.algorithm = SRL_TOKEN_BUCKET, .permits = 0, .window_ns = SEC};
    ck_assert_ptr_eq(srl_default_ticker(&bad), srl_monotonic_ns);
    ck_assert_ptr_eq(srl_default_ticker(NULL), srl_monotonic_ns);
}
END_TEST

struct last_seen {
    uint64_t last_ns;
    int n;
};

static int remember_last(const srl_entry *e, void *ctx)
{
    struct last_seen *l = ctx;
    l->last_ns = e->last_ns;
    l->n++;
    return 0;
}

/* A limiter opened without a ticker stamps its states with the clock the
 * rule picked: the state's time lies between two readings of that clock
 * taken around the request (both clocks are monotonic, so this is exact). */
START_TEST(a_limiter_without_a_ticker_reads_the_clock_the_rule_picks)
{
    uint64_t r = srl_coarse_resolution_ns();
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.capacity = 16;
    /* _i 0: T = 1000 r (coarse); 1: T = r / 10 (precise) */
    cfg.policy = _i == 0 ? (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = 1, .window_ns = 1000 * r}
                         : (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = 10, .window_ns = r};
    srl_ticker_fn want = _i == 0 ? srl_monotonic_coarse_ns : srl_monotonic_ns;
    ck_assert_ptr_eq(srl_default_ticker(&cfg.policy), want);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    uint64_t before = want(NULL);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    uint64_t after = want(NULL);
    ck_assert_int_eq(d.allowed, 1);
    struct last_seen l = {0, 0};
    ck_assert_int_eq(srl_foreach(lim, remember_last, &l), 1);
    ck_assert_int_eq(l.n, 1);
    ck_assert_uint_ge(l.last_ns, before);
    ck_assert_uint_le(l.last_ns, after);
    srl_close(lim);
}
END_TEST

/* info.flags lists the flags that took effect, per store (srl.h,
 * srl_info_get): what a binding or a metrics page shows to say a path is
 * on.  Asked for everything, each store keeps what it can do. */
START_TEST(info_flags_list_only_the_asked_flags_that_took_effect_in_the_store)
{
    const unsigned all = SRL_CONFIG_DRY_RUN | SRL_CONFIG_FLOOD_CACHE | SRL_CONFIG_LOCKFREE;
    const struct {
        int local;
        srl_algorithm algo;
        unsigned ask, want;
    } rows[] = {
        {0, SRL_GCRA, 0, 0},
        {0, SRL_GCRA, SRL_CONFIG_LOCKFREE, SRL_CONFIG_LOCKFREE},
        {0, SRL_GCRA, all, SRL_CONFIG_DRY_RUN | SRL_CONFIG_FLOOD_CACHE},   /* dry run: locked */
        {0, SRL_GCRA, SRL_CONFIG_FLOOD_CACHE | SRL_CONFIG_LOCKFREE,
         SRL_CONFIG_FLOOD_CACHE | SRL_CONFIG_LOCKFREE},
        {0, SRL_TOKEN_BUCKET, SRL_CONFIG_LOCKFREE, 0},        /* slots not 16-aligned */
        {0, SRL_TOKEN_BUCKET, all, SRL_CONFIG_DRY_RUN | SRL_CONFIG_FLOOD_CACHE},
        {1, SRL_GCRA, SRL_CONFIG_LOCKFREE, SRL_CONFIG_LOCKFREE},
        {1, SRL_GCRA, SRL_CONFIG_FLOOD_CACHE, 0},             /* shared stores only */
        {1, SRL_GCRA, all, SRL_CONFIG_DRY_RUN},               /* no lock-free dry run */
        {1, SRL_TOKEN_BUCKET, SRL_CONFIG_LOCKFREE, 0},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        srl_config cfg;
        srl_config_init(&cfg);
        cfg.policy = (srl_policy){.algorithm = rows[r].algo, .permits = 10, .window_ns = SEC};
        cfg.capacity = 64;
        cfg.flags = rows[r].ask;
        srl_limiter *lim = NULL;
        ck_assert_int_eq(rows[r].local ? srl_open_local(&cfg, &lim) : srl_open_anonymous(&cfg, &lim),
                         0);
        srl_info in;
        memset(&in, 0xa5, sizeof in);
        ck_assert_int_eq(srl_info_get(lim, &in), 0);
        /* The shared stores' path needs a 16-byte CAS; the local one's has
         * an 8-byte fallback (cas16.h). */
        unsigned want = rows[r].want;
        if (!rows[r].local && !srl__cas16_usable())
            want &= ~(unsigned)SRL_CONFIG_LOCKFREE;
        ck_assert_msg(in.flags == want, "row %zu: flags 0x%x, want 0x%x", r, in.flags, want);
        ck_assert_uint_eq(in.reserved32, 0);
        ck_assert_uint_eq(in.reserved[0], 0);
        ck_assert_uint_eq(in.reserved[1], 0);
        srl_close(lim);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limiter");
    TCase *tc = tcase_create("facade");
    /* loop index 0: anonymous shared store, 1: local store */
    tcase_add_loop_test(tc, empty_and_oversized_keys_are_rejected_with_ekey_and_change_nothing, 0, 2);
    tcase_add_loop_test(tc, cost_zero_or_above_the_limit_is_ecost_and_takes_nothing, 0, 2);
    tcase_add_loop_test(tc, null_arguments_are_einval, 0, 2);
    tcase_add_loop_test(tc, reset_and_peek_of_an_untracked_key_are_enoent, 0, 2);
    tcase_add_loop_test(tc, invalid_configs_are_refused_before_anything_is_made, 0, 2);
    tcase_add_test(tc, every_error_code_has_its_own_message);
    tcase_add_test(tc, every_error_code_keeps_its_number_and_is_named_as_in_srl_h);
    tcase_add_loop_test(tc, check_is_not_supported_on_a_local_limiter_and_healthy_on_a_new_segment, 0, 2);
    tcase_add_test(tc, default_ticker_is_coarse_only_when_the_emission_interval_is_100_resolutions);
    tcase_add_loop_test(tc, a_limiter_without_a_ticker_reads_the_clock_the_rule_picks, 0, 2);
    tcase_add_test(tc, info_flags_list_only_the_asked_flags_that_took_effect_in_the_store);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
