/*
 * check_keyfit.c - srl_key_fit, the one long-key rule of every binding.
 *
 * Exact lengths and returned pointers at the boundary (4096 is itself,
 * 4097 is fitted), the empty key left to the caller, two long keys that
 * differ only in their last byte fitted apart, and the fitted form pinned
 * to fixed vectors (BLAKE2b-256 computed independently, by Python's
 * hashlib): a change of the form would move every stored long key, in
 * every binding and host, and must be a deliberate one.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"

#define HEAD (SRL_KEY_MAX - 32u)

/* n bytes of the fixed pattern i % 251 (malloc'd). */
static unsigned char *pattern(size_t n)
{
    unsigned char *k = malloc(n);
    ck_assert_ptr_nonnull(k);
    for (size_t i = 0; i < n; i++)
        k[i] = (unsigned char)(i % 251);
    return k;
}

static void hex(const unsigned char *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

START_TEST(a_key_of_1_to_4096_bytes_is_itself_and_buf_is_untouched)
{
    static const size_t lens[] = {1, 2, 100, HEAD, SRL_KEY_MAX - 1, SRL_KEY_MAX};
    unsigned char *k = pattern(SRL_KEY_MAX);
    static unsigned char buf[SRL_KEY_MAX];
    for (unsigned i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        memset(buf, 0xa5, sizeof buf);
        size_t len = lens[i];
        ck_assert_ptr_eq(srl_key_fit(k, &len, buf), k);
        ck_assert_uint_eq(len, lens[i]);
        for (size_t j = 0; j < sizeof buf; j++)
            ck_assert_uint_eq(buf[j], 0xa5);
    }
    free(k);
}
END_TEST

START_TEST(a_key_of_4097_bytes_and_more_is_fitted_to_exactly_4096)
{
    static const size_t lens[] = {SRL_KEY_MAX + 1, SRL_KEY_MAX + 2, 5000, 1u << 20};
    unsigned char *k = pattern(1u << 20);
    static unsigned char buf[SRL_KEY_MAX];
    for (unsigned i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        size_t len = lens[i];
        ck_assert_ptr_eq(srl_key_fit(k, &len, buf), buf);
        ck_assert_uint_eq(len, SRL_KEY_MAX);
        ck_assert_mem_eq(buf, k, HEAD);   /* the head: the key's own first bytes */
    }
    free(k);
}
END_TEST

START_TEST(the_empty_key_is_the_callers_rule_null_and_nothing_written)
{
    static unsigned char buf[SRL_KEY_MAX];
    memset(buf, 0xa5, sizeof buf);
    size_t len = 0;
    ck_assert_ptr_null(srl_key_fit("x", &len, buf));
    ck_assert_uint_eq(len, 0);
    ck_assert_uint_eq(buf[0], 0xa5);
    ck_assert_uint_eq(buf[SRL_KEY_MAX - 1], 0xa5);
    len = 0;
    ck_assert_ptr_null(srl_key_fit(NULL, &len, buf));
    len = 3;
    ck_assert_ptr_null(srl_key_fit(NULL, &len, buf));
    ck_assert_ptr_null(srl_key_fit("abc", NULL, buf));
    len = SRL_KEY_MAX + 1;
    unsigned char *k = pattern(len);
    ck_assert_ptr_null(srl_key_fit(k, &len, NULL));
    ck_assert_uint_eq(len, SRL_KEY_MAX + 1);
    len = 3;
    ck_assert_ptr_eq(srl_key_fit(k, &len, NULL), k);   /* nothing to write: buf unused */
    free(k);
}
END_TEST

START_TEST(two_long_keys_differing_only_in_the_last_byte_are_fitted_apart)
{
    static const size_t lens[] = {SRL_KEY_MAX + 1, 5000, 1u << 16};
    for (unsigned i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        unsigned char *a = pattern(lens[i]), *b = pattern(lens[i]);
        b[lens[i] - 1] ^= 1;
        static unsigned char fa[SRL_KEY_MAX], fb[SRL_KEY_MAX];
        size_t la = lens[i], lb = lens[i];
        srl_key_fit(a, &la, fa);
        srl_key_fit(b, &lb, fb);
        ck_assert_uint_eq(la, lb);
        ck_assert_mem_eq(fa, fb, HEAD);                  /* same head */
        ck_assert_int_ne(memcmp(fa, fb, SRL_KEY_MAX), 0);   /* told apart by the hash */
        free(a);
        free(b);
    }
    /* A key and the same key one byte longer: the length is in the hash. */
    unsigned char *k = pattern(5001);
    static unsigned char f0[SRL_KEY_MAX], f1[SRL_KEY_MAX];
    size_t l0 = 5000, l1 = 5001;
    srl_key_fit(k, &l0, f0);
    srl_key_fit(k, &l1, f1);
    ck_assert_int_ne(memcmp(f0, f1, SRL_KEY_MAX), 0);
    free(k);
}
END_TEST

START_TEST(the_fitted_form_is_stable_head_then_blake2b_256_of_the_whole_key)
{
    static const struct {
        size_t len;
        const char *hash;   /* hashlib.blake2b(pattern(len), digest_size=32) */
    } v[] = {
        {5000, "380a35589ac0b8796076c76b284d2e0dd0842d3eac226475610946e0c2277b8b"},
        {SRL_KEY_MAX + 1, "615e89d4794280669cf1c7d4a8a5fcb8c97652bf82964fdb2c89d0a9d6146fa8"},
    };
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; i++) {
        unsigned char *k = pattern(v[i].len);
        static unsigned char buf[SRL_KEY_MAX];
        size_t len = v[i].len;
        ck_assert_ptr_eq(srl_key_fit(k, &len, buf), buf);
        char got[65];
        hex(buf + HEAD, 32, got);
        ck_assert_str_eq(got, v[i].hash);
        /* Twice: the same bytes (no state, no seed). */
        static unsigned char again[SRL_KEY_MAX];
        len = v[i].len;
        srl_key_fit(k, &len, again);
        ck_assert_mem_eq(buf, again, SRL_KEY_MAX);
        free(k);
    }
}
END_TEST

START_TEST(fitted_keys_are_keys_every_store_takes_and_count_apart)
{
    srl_config cfg;
    srl_config_init(&cfg);
    ck_assert_int_eq(srl_policy_parse("token_bucket:1/1h", &cfg.policy), 0);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    unsigned char *a = pattern(5000), *b = pattern(5000);
    b[4999] ^= 1;
    static unsigned char fa[SRL_KEY_MAX], fb[SRL_KEY_MAX];
    size_t la = 5000, lb = 5000;
    const void *ka = srl_key_fit(a, &la, fa), *kb = srl_key_fit(b, &lb, fb);
    srl_decision d;
    ck_assert_int_eq(srl_acquire(lim, a, 5000, 1, &d), SRL_EKEY);   /* the raw key: refused */
    ck_assert_int_eq(srl_acquire(lim, ka, la, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(srl_acquire(lim, kb, lb, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);   /* its own count */
    ck_assert_int_eq(srl_acquire(lim, ka, la, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_close(lim);
    free(a);
    free(b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("keyfit");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_key_of_1_to_4096_bytes_is_itself_and_buf_is_untouched);
    tcase_add_test(tc, a_key_of_4097_bytes_and_more_is_fitted_to_exactly_4096);
    tcase_add_test(tc, the_empty_key_is_the_callers_rule_null_and_nothing_written);
    tcase_add_test(tc, two_long_keys_differing_only_in_the_last_byte_are_fitted_apart);
    tcase_add_test(tc, the_fitted_form_is_stable_head_then_blake2b_256_of_the_whole_key);
    tcase_add_test(tc, fitted_keys_are_keys_every_store_takes_and_count_apart);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
