/*
 * check_policyd.c - srl-policyd's parts (policyd/): the protocol reader on
 * exact inputs (a good request fed in every chunk size, each bound at its
 * edge and one past, NUL and non-UTF-8 bytes, a peer that never sends the
 * empty line, over a socketpair), the config parser's exact messages, and
 * the decisions (cost = recipient_count, missing key -> missing_action,
 * exemptions, a denial refunding the quotas before it) on real segments.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf.h"
#include "decide.h"
#include "proto.h"
#include "serve.h"
#include "srl.h"
#include "testutil.h"

/* Read one request of data (len bytes) with the given bounds. */
static int read_mem(pd_reader *r, pd_mem *m, const char *data, size_t len, size_t chunk,
                    uint32_t line_max, uint32_t attrs_max, char *why)
{
    *m = (pd_mem){data, len, 0, chunk};
    ck_assert_int_eq(pd_reader_init(r, pd_fill_mem, m, line_max, attrs_max, 1000, 1000), 0);
    return pd_read_request(r, why, 256);
}

static const char good[] = "request=smtpd_access_policy\nprotocol_state=DATA\n"
                           "sender=a@example.org\nrecipient_count=3\nsender=second@x\n"
                           "sasl_username=j\xc3\xa9r\xc3\xb4me\nempty=\n\n"
                           "request=smtpd_access_policy\n\n";

START_TEST(reader_good_every_chunk)
{
    for (size_t chunk = 1; chunk <= sizeof good; chunk++) {
        pd_reader r;
        pd_mem m;
        char why[256];
        ck_assert_int_eq(read_mem(&r, &m, good, sizeof good - 1, chunk, 64, 10, why), PD_OK);
        ck_assert_uint_eq(r.count, 7);
        ck_assert_str_eq(pd_get(&r, "request"), "smtpd_access_policy");
        ck_assert_str_eq(pd_get(&r, "sender"), "a@example.org"); /* the first */
        ck_assert_str_eq(pd_get(&r, "recipient_count"), "3");
        ck_assert_str_eq(pd_get(&r, "sasl_username"), "j\xc3\xa9r\xc3\xb4me");
        ck_assert_str_eq(pd_get(&r, "empty"), "");
        ck_assert_ptr_null(pd_get(&r, "client_address"));
        /* The second request on the same connection, then a clean end. */
        ck_assert_int_eq(pd_read_request(&r, why, sizeof why), PD_OK);
        ck_assert_uint_eq(r.count, 1);
        ck_assert_int_eq(pd_read_request(&r, why, sizeof why), PD_EOF);
        pd_reader_free(&r);
    }
}
END_TEST

static const struct {
    const char *input;
    size_t len;       /* 0: strlen */
    uint32_t line_max, attrs_max;
    int status;
    const char *why;
} bad[] = {
    /* line_max 16: 16 bytes pass, 17 do not */
    {"request=smtpd_ac\n\n", 0, 16, 10, PD_OK, ""},
    {"request=smtpd_acc\n\n", 0, 16, 10, PD_TOO_LONG, "line 1: longer than 16 bytes (max_line)"},
    {"a=1\nb=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, 16, 10, PD_TOO_LONG,
     "line 2: longer than 16 bytes (max_line)"},
    /* attrs_max 2 */
    {"a=1\nb=2\n\n", 0, 16, 2, PD_OK, ""},
    {"a=1\nb=2\nc=3\n\n", 0, 16, 2, PD_TOO_MANY,
     "more than 2 attributes in one request (max_attributes)"},
    {"a=1\nb=\0x\n\n", 10, 16, 10, PD_BAD_BYTE,
     "line 2: a NUL byte at column 3 (the protocol forbids NUL)"},
    {"a=\xff\n\n", 0, 16, 10, PD_BAD_BYTE, "line 1: byte 0xff at column 3 is not UTF-8"},
    {"a=\xc0\xaf\n\n", 0, 16, 10, PD_BAD_BYTE, "line 1: byte 0xc0 at column 3 is not UTF-8"},
    {"a=\xed\xa0\x80\n\n", 0, 16, 10, PD_BAD_BYTE, "line 1: byte 0xed at column 3 is not UTF-8"},
    {"a=1\nnoequals\n\n", 0, 16, 10, PD_BAD_LINE, "line 2: expected name=value, got no '='"},
    {"=v\n\n", 0, 16, 10, PD_BAD_LINE, "line 1: expected name=value, got an empty name"},
    {"\n", 0, 16, 10, PD_BAD_LINE, "an empty request (no attributes before the empty line)"},
    {"a=1\nb=2\n", 0, 16, 10, PD_TRUNCATED,
     "the peer closed inside a request (after 2 lines, no empty line)"},
    {"", 0, 16, 10, PD_EOF, ""},
};

START_TEST(reader_bad)
{
    pd_reader r;
    pd_mem m;
    char why[256];
    size_t len = bad[_i].len ? bad[_i].len : strlen(bad[_i].input);
    int st = read_mem(&r, &m, bad[_i].input, len, 7, bad[_i].line_max, bad[_i].attrs_max, why);
    ck_assert_msg(st == bad[_i].status, "input %d: status %d, expected %d (%s)", _i, st,
                  bad[_i].status, why);
    ck_assert_str_eq(why, bad[_i].why);
    pd_reader_free(&r);
}
END_TEST

/* A peer that sends a line and never the empty line: the reader gives up at
 * its request timeout (a bound, not a measured time: only the outcome is
 * asserted), and pd_serve answers default_action and closes. */
START_TEST(reader_timeout_socketpair)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    const char part[] = "request=smtpd_access_policy\nsender=a@b\n";
    ck_assert_int_eq(write(sv[1], part, strlen(part)), (ssize_t)strlen(part));
    pd_reader r;
    char why[256];
    ck_assert_int_eq(pd_reader_init(&r, pd_fill_fd, &sv[0], 64, 10, 5000, 50), 0);
    ck_assert_int_eq(pd_read_request(&r, why, sizeof why), PD_TIMEOUT);
    ck_assert_str_eq(why, "no empty line within 50 ms of the request's first byte (read 2 lines)");
    pd_reader_free(&r);

    pd_conf c;
    char err[512];
    const char *text = "log stderr\nrequest_timeout 1\ndefault_action DEFER_IF_PERMIT 4.3.0 "
                       "bad request\nquota q sliding_counter:1/1h\nkey sender\n";
    ck_assert_int_eq(pd_conf_parse(&c, "t.conf", text, strlen(text), err, sizeof err), 0);
    ck_assert_int_eq(write(sv[1], part, strlen(part)), (ssize_t)strlen(part));
    ck_assert_int_eq(pd_serve(&c, sv[0], sv[0], "test"), 1);
    close(sv[0]);
    char reply[128] = {0};
    ssize_t n = read(sv[1], reply, sizeof reply - 1);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(reply, "action=DEFER_IF_PERMIT 4.3.0 bad request\n\n");
    ck_assert_int_eq(read(sv[1], reply, sizeof reply), 0); /* closed */
    close(sv[1]);
    pd_conf_free(&c);
}
END_TEST

static const struct {
    const char *text;
    const char *err;
} conf_bad[] = {
    {"", "t.conf:0: no quota: add e.g. 'quota sasl sliding_counter:100/1h' and 'key sasl_username'"},
    {"lisen unix:/x\n", "t.conf:1: unknown directive 'lisen' (did you mean listen?)"},
    {"bogus_thing 1\n", "t.conf:1: unknown directive 'bogus_thing'"},
    {"\n# c\nkey sender\n", "t.conf:3: key belongs to a quota: put it after a 'quota NAME LIMIT' line"},
    {"listen inet:10.0.0.1:99\n", "t.conf:1: listen must be stdin, unix:/ABSOLUTE/PATH or "
     "inet:127.0.0.1:PORT (a loopback address), not 'inet:10.0.0.1:99'"},
    {"max_line 63\n", "t.conf:1: max_line must be bytes, 64..65536, not '63'"},
    {"max_line 65537\n", "t.conf:1: max_line must be bytes, 64..65536, not '65537'"},
    {"request_timeout 0\n", "t.conf:1: request_timeout must be seconds, 1..3600, not '0'"},
    {"socket_mode 666\n", "t.conf:1: socket_mode must be octal permission bits 00..0777 "
     "(e.g. 0660), not '666'"},
    {"log /rel\nlog syslg\n", "t.conf:2: log must be syslog, stderr or an absolute file path, not 'syslg'"},
    {"default_action\n", "t.conf:1: default_action needs a value"},
    {"default_action DEFER\x01\n", "t.conf:1: a control byte 0x01 at column 21"},
    {"quota q\n", "t.conf:1: quota q needs a limit, e.g. 'quota q sliding_counter:100/1h + "
     "sliding_counter:500/1d'"},
    {"quota q sliding_counter:100/1x\n", NULL}, /* srl's message: checked below */
    {"quota q 5/1m\nkey sender\nquota q 5/1m\n", "t.conf:3: quota 'q' is defined twice"},
    {"quota q 5/1m\n", "t.conf:1: quota q has no key (e.g. 'key sasl_username')"},
    {"quota q 5/1m\nkey Sender\n", "t.conf:2: key: 'Sender' is not an attribute name "
     "(e.g. sasl_username, sender, client_address)"},
    {"quota q 5/1m\nkey sender\ncost 0\n", "t.conf:3: cost must be a number 1..4294967295 or an "
     "attribute name (recipient_count), not '0'"},
    {"quota q 5/1m\nkey sender\ncapacity 0\n", NULL},
    {"quota q 5/1m\nkey sender\nexempt sender\n", "t.conf:3: exempt needs an attribute name and "
     "a value, e.g. 'exempt sasl_username postmaster'"},
    {"quota q 5/1m redis=redis://127.0.0.1:6379\nkey sender\n", "t.conf:1: quota q: redis= is "
     "not for srl-policyd (its state is in a shared segment on this host)"},
    {"quota q 5/1m\nkey sender\nsegment a/b\n", "t.conf:3: segment 'a/b' is not an srl segment name"},
};

START_TEST(conf_errors)
{
    pd_conf c;
    char err[512];
    const char *t = conf_bad[_i].text;
    ck_assert_int_eq(pd_conf_parse(&c, "t.conf", t, strlen(t), err, sizeof err),
                     -1);
    if (conf_bad[_i].err != NULL) {
        ck_assert_str_eq(err, conf_bad[_i].err);
        return;
    }
    /* srl's own words after ours: the limit through srl_config_parse, an
     * option through srl_config_set. */
    srl_config cfg;
    srl_policy_error e;
    srl_config_init(&cfg);
    char want[512];
    if (strstr(t, "capacity") != NULL) {
        ck_assert_int_ne(srl_config_set(&cfg, "capacity", "0", &e), 0);
        snprintf(want, sizeof want, "t.conf:3: capacity: %s", e.message);
    } else {
        ck_assert_int_ne(srl_config_parse(&cfg, "sliding_counter:100/1x", &e), 0);
        snprintf(want, sizeof want, "t.conf:1: quota q: %s (at '%.*s')", e.message, (int)e.length,
                 "sliding_counter:100/1x" + e.offset);
    }
    ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(conf_good)
{
    pd_conf c;
    char err[512];
    const char *text = "# srl-policyd\nlisten unix:/run/x.sock   # trailing comment\n"
                       "max_line 4096\n\tquota sasl sliding_counter:100/1h + sliding_counter:500/1d "
                       "capacity=1000\n  key sasl_username\n  cost recipient_count\n"
                       "  exempt sasl_username postmaster\n  on_full deny\n";
    ck_assert_int_eq(pd_conf_parse(&c, "t.conf", text, strlen(text), err, sizeof err), 0);
    ck_assert_str_eq(c.listen, "unix:/run/x.sock");
    ck_assert_uint_eq(c.max_line, 4096);
    ck_assert_uint_eq(c.quota_count, 1);
    ck_assert_str_eq(c.quota[0].segment, "srl-policyd-sasl");
    ck_assert_str_eq(c.quota[0].cost_attr, "recipient_count");
    ck_assert_str_eq(c.default_action, "DUNNO");
    char spec[SRL_CONFIG_TEXT_MAX];
    ck_assert_int_gt(srl_config_format(&c.quota[0].cfg, spec, sizeof spec), 0);
    ck_assert_str_eq(spec, "sliding_counter:100/1h + sliding_counter:500/1d capacity=1000 "
                           "on_full=deny");
    pd_conf_free(&c);
}
END_TEST

/* A config of quotas on fresh segments, opened. */
static void open_conf(pd_conf *c, const char *body)
{
    char text[2048], err[512], a[128];
    snprintf(a, sizeof a, "%s", unique_name("pdA")); /* unique_name's buffer is reused */
    snprintf(text, sizeof text, body, a, unique_name("pdB"));
    ck_assert_msg(pd_conf_parse(c, "t.conf", text, strlen(text), err, sizeof err) == 0, "%s", err);
    ck_assert_msg(pd_conf_open(c, err, sizeof err) == 0, "%s", err);
}

static void close_conf(pd_conf *c)
{
    char *segs[PD_QUOTAS_MAX];
    uint32_t n = c->quota_count;
    for (uint32_t i = 0; i < n; i++) segs[i] = strdup(c->quota[i].segment);
    pd_conf_free(c);
    for (uint32_t i = 0; i < n; i++) {
        srl_unlink(segs[i]);
        free(segs[i]);
    }
}

/* decide REQUEST: the outcome of one request text under c; action kept. */
static int decide(pd_conf *c, const char *req, char *action)
{
    pd_reader r;
    pd_mem m;
    char why[256];
    ck_assert_int_eq(read_mem(&r, &m, req, strlen(req), 4096, 2048, 100, why), PD_OK);
    int o = pd_decide(c, &r, action, 640, why, sizeof why);
    pd_reader_free(&r);
    return o;
}

#define REQ(rc) "request=smtpd_access_policy\nprotocol_state=DATA\nsender=a@x\n" \
                "recipient_count=" rc "\n\n"

START_TEST(decide_cost_is_recipient_count)
{
    pd_conf c;
    char action[640];
    open_conf(&c, "quota q sliding_counter:5/1h\nkey sender\ncost recipient_count\nsegment %s\n"
                  "#%s\n");
    ck_assert_int_eq(decide(&c, REQ("3"), action), PD_PASS);
    ck_assert_str_eq(action, "DUNNO");
    ck_assert_int_eq(decide(&c, REQ("3"), action), PD_DEFER); /* 3 + 3 > 5 */
    ck_assert_msg(strncmp(action, "DEFER_IF_PERMIT 4.7.1 quota q exceeded, retry in ", 49) == 0,
                  "%s", action);
    ck_assert_str_eq(action + strlen(action) - 8, " seconds");
    ck_assert_int_eq(decide(&c, REQ("2"), action), PD_PASS); /* 3 + 2 = 5 */
    ck_assert_int_eq(decide(&c, REQ("0"), action), PD_DEFER); /* RCPT stage: 1 */
    ck_assert_int_eq(decide(&c, REQ("6"), action), PD_TOO_BIG);
    ck_assert_str_eq(action, "REJECT 5.7.1 6 recipients are more than quota q allows");
    ck_assert_int_eq(decide(&c, REQ("x1"), action), PD_BAD_REQUEST);
    ck_assert_str_eq(action, "DUNNO");
    close_conf(&c);
}
END_TEST

START_TEST(decide_missing_exempt_refund)
{
    pd_conf c;
    char action[640];
    open_conf(&c, "missing_action REJECT 5.7.0 authenticate first\n"
                  "quota wide sliding_counter:10/1h\nkey sender\nexempt sender boss@x\nsegment %s\n"
                  "quota tight sliding_counter:1/1h\nkey sender client_address\nsegment %s\n");
    /* No client_address: tight's key is missing -> missing_action. */
    ck_assert_int_eq(decide(&c, REQ("1"), action), PD_MISSING);
    ck_assert_str_eq(action, "REJECT 5.7.0 authenticate first");
    ck_assert_int_eq(decide(&c, "request=other\n\n", action), PD_BAD_REQUEST);
    ck_assert_int_eq(decide(&c, "sender=a@x\n\n", action), PD_BAD_REQUEST);
    const char *ok = "request=smtpd_access_policy\nsender=a@x\nclient_address=1.2.3.4\n\n";
    ck_assert_int_eq(decide(&c, ok, action), PD_PASS);
    ck_assert_int_eq(decide(&c, ok, action), PD_DEFER); /* tight denies, wide refunded */
    ck_assert_msg(strstr(action, "quota tight exceeded") != NULL, "%s", action);
    srl_decision d;
    ck_assert_int_eq(srl_peek(c.quota[0].lim, "a@x", 3, 1, &d), 0);
    /* peek answers as an acquire of cost 1 would: 10 - used - 1.  One was
     * taken (the pass); the missing and the denied requests gave theirs back. */
    ck_assert_uint_eq(d.remaining, 8);
    /* Exempt from wide: wide counts nothing for boss@x. */
    const char *boss = "request=smtpd_access_policy\nsender=boss@x\nclient_address=1.2.3.4\n\n";
    ck_assert_int_eq(decide(&c, boss, action), PD_PASS);
    ck_assert_int_eq(srl_peek(c.quota[0].lim, "boss@x", 6, 1, &d), SRL_ENOENT); /* never counted */
    close_conf(&c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("policyd");
    TCase *t = tcase_create("reader");
    tcase_add_test(t, reader_good_every_chunk);
    tcase_add_loop_test(t, reader_bad, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(t, reader_timeout_socketpair);
    suite_add_tcase(s, t);
    t = tcase_create("conf");
    tcase_add_loop_test(t, conf_errors, 0, (int)(sizeof conf_bad / sizeof conf_bad[0]));
    tcase_add_test(t, conf_good);
    suite_add_tcase(s, t);
    t = tcase_create("decide");
    tcase_add_test(t, decide_cost_is_recipient_count);
    tcase_add_test(t, decide_missing_exempt_refund);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
