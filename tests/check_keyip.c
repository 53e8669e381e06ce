/*
 * check_keyip.c - srl_key_ip and srl_cidr_parse / match / format
 * (src/http/keyip.c), the address keys and ranges every binding uses.
 *
 * Exact key texts (IPv4 /32 /24 /0, IPv6 /128 /64 /0, RFC 5952 forms,
 * IPv4-mapped IPv6 as IPv4), exact error codes for bad addresses, bad
 * prefixes and short buffers with the buffer left untouched, and match
 * tables for ranges of both families.  These texts are keys in live
 * segments and in Redis: a change moves every stored address key, so
 * they are pinned here byte for byte.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "srl.h"
#include "testutil.h"

struct key_case {
    const char *addr;
    unsigned v4, v6;
    const char *key;
};

static const struct key_case keys[] = {
    {"192.0.2.1", 32, 64, "192.0.2.1/32"},
    {"192.0.2.1", 24, 64, "192.0.2.0/24"},
    {"192.0.2.255", 25, 64, "192.0.2.128/25"},
    {"192.0.2.1", 0, 64, "0.0.0.0/0"},
    {"255.255.255.255", 31, 64, "255.255.255.254/31"},
    {"10.1.2.3", 8, 128, "10.0.0.0/8"},
    {"2001:db8:1:2:3:4:5:6", 32, 128, "2001:db8:1:2:3:4:5:6/128"},
    {"2001:db8:1:2:3:4:5:6", 32, 64, "2001:db8:1:2::/64"},
    {"2001:db8:1:2:3:4:5:6", 32, 0, "::/0"},
    {"2001:db8:1:2:3:4:5:6", 32, 56, "2001:db8:1::/56"},
    {"2001:DB8:0:0:0:0:0:1", 32, 128, "2001:db8::1/128"},
    {"2001:0db8:0000:0000:0001:0000:0000:0001", 32, 128, "2001:db8::1:0:0:1/128"},
    {"1:0:0:2:0:0:0:3", 32, 128, "1:0:0:2::3/128"},
    {"1:0:2:3:4:5:6:7", 32, 128, "1:0:2:3:4:5:6:7/128"},
    {"0:0:1:0:0:0:0:0", 32, 128, "0:0:1::/128"},
    {"::1", 32, 128, "::1/128"},
    {"::", 32, 128, "::/128"},
    {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 32, 128,
     "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"},
    {"fe80::1:2", 32, 10, "fe80::/10"},
    {"::1.2.3.4", 32, 128, "::102:304/128"},   /* compatible, not mapped: IPv6 */
    /* IPv4-mapped IPv6 is its IPv4 address, with the IPv4 prefix. */
    {"::ffff:1.2.3.4", 32, 64, "1.2.3.4/32"},
    {"::ffff:1.2.3.4", 24, 64, "1.2.3.0/24"},
    {"::FFFF:0102:0304", 16, 64, "1.2.0.0/16"},
    {"0:0:0:0:0:ffff:192.0.2.9", 0, 128, "0.0.0.0/0"},
};

START_TEST(srl_key_ip_writes_the_exact_key_of_each_prefix)
{
    for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char buf[SRL_KEY_IP_MAX];
        const struct key_case *k = &keys[i];
        int n = srl_key_ip(k->addr, k->v4, k->v6, buf, sizeof buf);
        ck_assert_msg(n == (int)strlen(k->key) && strcmp(buf, k->key) == 0,
                      "%s /%u,/%u: got %d \"%s\", want \"%s\"", k->addr, k->v4, k->v6, n,
                      n > 0 ? buf : "", k->key);
    }
}
END_TEST

START_TEST(the_longest_key_fits_srl_key_ip_max_exactly)
{
    char buf[SRL_KEY_IP_MAX];
    const char *a = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    ck_assert_int_eq(srl_key_ip(a, 32, 128, buf, sizeof buf), SRL_KEY_IP_MAX - 1);
    /* One byte short (no room for the NUL): SRL_ENOBUFS, nothing written. */
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(srl_key_ip(a, 32, 128, buf, SRL_KEY_IP_MAX - 1), SRL_ENOBUFS);
    for (unsigned i = 0; i < sizeof buf; i++)
        ck_assert_int_eq(buf[i], 'x');
    ck_assert_int_eq(srl_key_ip("192.0.2.1", 32, 64, buf, 12), SRL_ENOBUFS);
    ck_assert_int_eq(buf[0], 'x');
    ck_assert_int_eq(srl_key_ip("192.0.2.1", 32, 64, buf, 13), 12);
    ck_assert_str_eq(buf, "192.0.2.1/32");
}
END_TEST

static const char *const bad_addrs[] = {
    "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.04", " 1.2.3.4", "1.2.3.4 ",
    "1.2.3.4/32", "[::1]", "::1%lo", "fe80::1%eth0", "1.2.3.4:80", "::1::2", "12345::",
    "g::1", "1:2:3:4:5:6:7:8:9", "localhost", "0x01020304",
    /* 65 bytes: longer than any address, refused before inet_pton. */
    "0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:00000",
};

START_TEST(bad_addresses_and_prefixes_are_srl_einval_and_nothing_is_written)
{
    char buf[SRL_KEY_IP_MAX];
    memset(buf, 'x', sizeof buf);
    for (unsigned i = 0; i < sizeof bad_addrs / sizeof bad_addrs[0]; i++)
        ck_assert_msg(srl_key_ip(bad_addrs[i], 32, 64, buf, sizeof buf) == SRL_EINVAL,
                      "\"%s\" accepted", bad_addrs[i]);
    ck_assert_int_eq(srl_key_ip(NULL, 32, 64, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ip("1.2.3.4", 33, 64, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ip("::1", 32, 129, buf, sizeof buf), SRL_EINVAL);
    /* Both prefixes are arguments: either out of range is refused whatever
     * the family of this address. */
    ck_assert_int_eq(srl_key_ip("::1", 33, 64, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ip("1.2.3.4", 32, 129, buf, sizeof buf), SRL_EINVAL);
    for (unsigned i = 0; i < sizeof buf; i++)
        ck_assert_int_eq(buf[i], 'x');
    ck_assert_int_eq(srl_key_ip("1.2.3.4", 32, 64, NULL, 64), SRL_EINVAL);
}
END_TEST

struct cidr_case {
    const char *text;
    unsigned family, prefix;
    const char *formatted;
};

static const struct cidr_case cidrs[] = {
    {"10.0.0.0/8", 4, 8, "10.0.0.0/8"},
    {"192.168.0.0/16", 4, 16, "192.168.0.0/16"},
    {"0.0.0.0/0", 4, 0, "0.0.0.0/0"},
    {"127.0.0.1", 4, 32, "127.0.0.1/32"},
    {"127.0.0.1/32", 4, 32, "127.0.0.1/32"},
    {"::1", 6, 128, "::1/128"},
    {"::/0", 6, 0, "::/0"},
    {"2001:DB8::/32", 6, 32, "2001:db8::/32"},
    {"2001:db8:1:2::/64", 6, 64, "2001:db8:1:2::/64"},
    {"::ffff:10.0.0.0/104", 4, 8, "10.0.0.0/8"},
    {"::ffff:0.0.0.0/96", 4, 0, "0.0.0.0/0"},
    {"::ffff:1.2.3.4", 4, 32, "1.2.3.4/32"},
};

START_TEST(srl_cidr_parse_reads_ranges_and_format_writes_them_back)
{
    for (unsigned i = 0; i < sizeof cidrs / sizeof cidrs[0]; i++) {
        const struct cidr_case *k = &cidrs[i];
        srl_cidr c;
        memset(&c, 0xa5, sizeof c);
        ck_assert_msg(srl_cidr_parse(k->text, &c) == 0, "%s refused", k->text);
        ck_assert_uint_eq(c.family, k->family);
        ck_assert_uint_eq(c.prefix, k->prefix);
        char buf[SRL_KEY_IP_MAX];
        int n = srl_cidr_format(&c, buf, sizeof buf);
        ck_assert_int_eq(n, (int)strlen(k->formatted));
        ck_assert_str_eq(buf, k->formatted);
        /* Format then parse is the same range, byte for byte. */
        srl_cidr again;
        ck_assert_int_eq(srl_cidr_parse(buf, &again), 0);
        ck_assert_mem_eq(&again, &c, sizeof c);
        /* Beyond the family's address bytes all is zero (srl.h). */
        for (unsigned b = c.family == 4 ? 4 : 16; b < 16; b++)
            ck_assert_uint_eq(c.addr[b], 0);
    }
}
END_TEST

static const char *const bad_cidrs[] = {
    "", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/08", "10.0.0.0/-1", "10.0.0.0/+8",
    "10.0.0.0/8/8", "10.0.0.0/ 8", "10.0.0.0/8 ", "10.0.0.0/1000", "::/129", "::/0128",
    "10.0.0.1/8",          /* host bits set */
    "192.168.1.0/16", "2001:db8::1/64", "::ffff:10.0.0.0/95", "::ffff:10.0.0.0/8",
    "::ffff:10.0.0.1/104", "10.0.0.0/8x", "10.0.0.0/x", "1.2.3/8", "[::1]/128", "::1%lo/128",
    "256.0.0.0/8",
};

START_TEST(bad_ranges_are_srl_einval_and_out_is_unchanged)
{
    for (unsigned i = 0; i < sizeof bad_cidrs / sizeof bad_cidrs[0]; i++) {
        srl_cidr c, before;
        memset(&c, 0xa5, sizeof c);
        before = c;
        ck_assert_msg(srl_cidr_parse(bad_cidrs[i], &c) == SRL_EINVAL, "\"%s\" accepted",
                      bad_cidrs[i]);
        ck_assert_mem_eq(&c, &before, sizeof c);
    }
    srl_cidr c;
    ck_assert_int_eq(srl_cidr_parse(NULL, &c), SRL_EINVAL);
    ck_assert_int_eq(srl_cidr_parse("10.0.0.0/8", NULL), SRL_EINVAL);
    /* A long tail after a good range is refused, not cut off and accepted. */
    char longer[200];
    memset(longer, '0', sizeof longer);
    memcpy(longer, "10.0.0.0/8", 10);
    longer[sizeof longer - 1] = '\0';
    ck_assert_int_eq(srl_cidr_parse(longer, &c), SRL_EINVAL);
}
END_TEST

struct match_case {
    const char *range, *addr;
    int want;
};

static const struct match_case matches[] = {
    {"10.0.0.0/8", "10.0.0.0", 1},
    {"10.0.0.0/8", "10.255.255.255", 1},
    {"10.0.0.0/8", "11.0.0.0", 0},
    {"10.0.0.0/8", "9.255.255.255", 0},
    {"10.0.0.0/8", "::ffff:10.1.2.3", 1},      /* mapped counts as IPv4 */
    {"10.0.0.0/8", "::ffff:11.1.2.3", 0},
    {"10.0.0.0/8", "::a01:203", 0},            /* compatible is IPv6 */
    {"10.0.0.0/8", "a01:203::", 0},            /* same bytes, other family */
    {"::ffff:10.0.0.0/104", "10.9.9.9", 1},
    {"127.0.0.0/8", "127.0.0.2", 1},
    {"192.168.0.0/16", "192.168.255.1", 1},
    {"192.168.0.0/16", "192.169.0.1", 0},
    {"192.0.2.128/25", "192.0.2.127", 0},
    {"192.0.2.128/25", "192.0.2.128", 1},
    {"0.0.0.0/0", "255.255.255.255", 1},
    {"0.0.0.0/0", "::1", 0},
    {"127.0.0.1", "127.0.0.1", 1},
    {"127.0.0.1", "127.0.0.2", 0},
    {"::1", "::1", 1},
    {"::1", "::2", 0},
    {"::1", "127.0.0.1", 0},
    {"::/0", "2001:db8::1", 1},
    {"::/0", "1.2.3.4", 0},
    {"::/0", "::ffff:1.2.3.4", 0},             /* an IPv4 client, not in ::/0 */
    {"2001:db8::/32", "2001:db8:ffff:ffff::1", 1},
    {"2001:db8::/32", "2001:db9::1", 0},
    {"2001:db8:1:2::/64", "2001:db8:1:2:ffff:ffff:ffff:ffff", 1},
    {"2001:db8:1:2::/64", "2001:db8:1:3::", 0},
    {"fe80::/10", "febf::1", 1},
    {"fe80::/10", "fec0::1", 0},
};

START_TEST(srl_cidr_match_tables_for_both_families)
{
    for (unsigned i = 0; i < sizeof matches / sizeof matches[0]; i++) {
        srl_cidr c;
        ck_assert_int_eq(srl_cidr_parse(matches[i].range, &c), 0);
        ck_assert_msg(srl_cidr_match(&c, matches[i].addr) == matches[i].want,
                      "%s in %s: got %d, want %d", matches[i].addr, matches[i].range,
                      srl_cidr_match(&c, matches[i].addr), matches[i].want);
    }
}
END_TEST

START_TEST(match_and_format_refuse_bad_input)
{
    srl_cidr c;
    ck_assert_int_eq(srl_cidr_parse("10.0.0.0/8", &c), 0);
    for (unsigned i = 0; i < sizeof bad_addrs / sizeof bad_addrs[0]; i++)
        ck_assert_msg(srl_cidr_match(&c, bad_addrs[i]) == SRL_EINVAL, "\"%s\" matched",
                      bad_addrs[i]);
    ck_assert_int_eq(srl_cidr_match(&c, NULL), SRL_EINVAL);
    ck_assert_int_eq(srl_cidr_match(NULL, "10.0.0.1"), SRL_EINVAL);
    char buf[SRL_KEY_IP_MAX];
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(srl_cidr_format(&c, buf, 10), SRL_ENOBUFS);   /* "10.0.0.0/8" + NUL */
    ck_assert_int_eq(buf[0], 'x');
    ck_assert_int_eq(srl_cidr_format(&c, buf, 11), 10);
    srl_cidr bad = c;
    bad.family = 5;
    ck_assert_int_eq(srl_cidr_match(&bad, "10.0.0.1"), SRL_EINVAL);
    ck_assert_int_eq(srl_cidr_format(&bad, buf, sizeof buf), SRL_EINVAL);
    bad = c;
    bad.prefix = 33;
    ck_assert_int_eq(srl_cidr_match(&bad, "10.0.0.1"), SRL_EINVAL);
    ck_assert_int_eq(srl_cidr_format(&bad, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_cidr_format(NULL, buf, sizeof buf), SRL_EINVAL);
    ck_assert_int_eq(srl_cidr_format(&c, NULL, sizeof buf), SRL_EINVAL);
}
END_TEST

START_TEST(srl_key_ip_form_reads_the_bindings_prefix_forms)
{
    static const struct { const char *text; unsigned v4, v6; } good[] = {
        {"/32", 32, 64}, {"/24", 24, 64}, {"/0", 0, 64}, {"/32,/64", 32, 64},
        {"/24,/48", 24, 48}, {"/0,/0", 0, 0}, {"/32,/128", 32, 128}, {"/8,/1", 8, 1},
    };
    for (unsigned i = 0; i < sizeof good / sizeof good[0]; i++) {
        unsigned v4 = 99, v6 = 99;
        ck_assert_msg(srl_key_ip_form(good[i].text, strlen(good[i].text), &v4, &v6) == 0, "%s",
                      good[i].text);
        ck_assert_msg(v4 == good[i].v4 && v6 == good[i].v6, "%s: %u %u", good[i].text, v4, v6);
    }
    static const char *const bad[] = {
        "", "/", "24", "/33", "/024", "/00", "/1000", "/24,", "/24,/", "/24,/129", "/24,/064",
        "/24/64", "/24,64", "/24 ,/64", "/24,/64,", "/24,/64/", "/-1", "/+8", "/24,/64x", "ip/24",
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned v4 = 99, v6 = 99;
        ck_assert_msg(srl_key_ip_form(bad[i], strlen(bad[i]), &v4, &v6) == SRL_EINVAL,
                      "\"%s\" accepted", bad[i]);
        ck_assert_uint_eq(v4, 99);
        ck_assert_uint_eq(v6, 99);
    }
    /* len bounds the text: what follows is not read. */
    unsigned v4 = 99, v6 = 99;
    ck_assert_int_eq(srl_key_ip_form("/24,/48 and more", 7, &v4, &v6), 0);
    ck_assert_uint_eq(v4, 24);
    ck_assert_uint_eq(v6, 48);
    ck_assert_int_eq(srl_key_ip_form("/24,/48", 6, &v4, &v6), 0);   /* "/24,/4" */
    ck_assert_uint_eq(v6, 4);
    ck_assert_int_eq(srl_key_ip_form(NULL, 3, &v4, &v6), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ip_form("/24", 3, NULL, &v6), SRL_EINVAL);
    ck_assert_int_eq(srl_key_ip_form("/24", 3, &v4, NULL), SRL_EINVAL);
}
END_TEST

/* The keys are what a limiter counts: two addresses of one /24 share one
 * count, an address of the next /24 has its own. */
START_TEST(addresses_of_one_prefix_share_one_limit)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_FIXED_WINDOW, .permits = 3, .window_ns = 3600 * SEC};
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_local(&cfg, &lim), 0);
    static const char *const addrs[] = {"192.0.2.1", "192.0.2.200", "::ffff:192.0.2.7",
                                        "192.0.2.9", "192.0.3.1"};
    static const int want[] = {1, 1, 1, 0, 1};
    for (unsigned i = 0; i < 5; i++) {
        char key[SRL_KEY_IP_MAX];
        int n = srl_key_ip(addrs[i], 24, 64, key, sizeof key);
        ck_assert_int_gt(n, 0);
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, key, (size_t)n, 1, &d), 0);
        ck_assert_msg(d.allowed == want[i], "%s (%s): allowed %d", addrs[i], key, d.allowed);
    }
    srl_close(lim);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("keyip");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, srl_key_ip_writes_the_exact_key_of_each_prefix);
    tcase_add_test(tc, the_longest_key_fits_srl_key_ip_max_exactly);
    tcase_add_test(tc, bad_addresses_and_prefixes_are_srl_einval_and_nothing_is_written);
    tcase_add_test(tc, srl_cidr_parse_reads_ranges_and_format_writes_them_back);
    tcase_add_test(tc, bad_ranges_are_srl_einval_and_out_is_unchanged);
    tcase_add_test(tc, srl_cidr_match_tables_for_both_families);
    tcase_add_test(tc, match_and_format_refuse_bad_input);
    tcase_add_test(tc, addresses_of_one_prefix_share_one_limit);
    tcase_add_test(tc, srl_key_ip_form_reads_the_bindings_prefix_forms);
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
