/*
 * trace_stores.c - the stores of the differential traces (trace_stores.h).
 * Check assertions only; nothing here is shared between processes.
 */
#include "trace_stores.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_testutil.h"

int srl__redis_fixed_time(srl_limiter *lim, int on);
srl_limiter *srl__tiered_redis(srl_limiter *lim);

srl_limits trace_parse(const char *text)
{
    srl_limits l;
    srl_policy_error pe;
    ck_assert_msg(srl_limits_parse_ex(text, &l, &pe) == 0, "%s: %s", text, pe.message);
    return l;
}

void trace_server_start(struct trace_store *st, const char *tag)
{
    snprintf(st->dir, sizeof st->dir, "/tmp/srl-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(st->dir));
    snprintf(st->sock, sizeof st->sock, "%s/redis.sock", st->dir);
    st->server = redis_server_start(st->dir, st->sock, NULL);
}

struct trace_store trace_store_open(int kind, const srl_limits *l, fake_clock *clk,
                                    const char *tag, const char *prefix)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.limits = *l;
    cfg.capacity = 100;
    cfg.ticker = fake_ticker(clk);
    struct trace_store st = {.kind = kind};
    if (kind == STORE_SHARED) {
        strcpy(st.name, unique_name(tag));
        ck_assert_int_eq(srl_open_shared(st.name, &cfg, SRL_CREATE | SRL_EXCL, &st.lim), 0);
        return st;
    }
    trace_server_start(&st, tag);
    char uri[160];
    snprintf(uri, sizeof uri, "unix://%s?prefix=%s", st.sock, prefix);
    srl_limiter *r;
    if (kind == STORE_REDIS) {
        ck_assert_int_eq(srl_open_redis(uri, &cfg, &st.lim), 0);
        r = st.lim;
    } else {
        strcpy(st.name, unique_name(tag));
        ck_assert_int_eq(srl_open_tiered(st.name, uri, &cfg, SRL_CREATE | SRL_EXCL, &st.lim), 0);
        r = srl__tiered_redis(st.lim);
        ck_assert_ptr_nonnull(r);
    }
    ck_assert_int_eq(srl__redis_fixed_time(r, 1), 0);
    return st;
}

void trace_store_close(struct trace_store *st)
{
    srl_close(st->lim);
    if (st->name[0] != '\0')
        ck_assert_int_eq(srl_unlink(st->name), 0);
    if (st->server > 0) {
        redis_server_stop(st->server);
        unlink(st->sock);
        rmdir(st->dir);
    }
}

void trace_same(int kind, const srl_decision *d, const srl_decision *e, int step,
                const char *what)
{
    if (kind == STORE_TIERED && (d->flags & SRL_DECISION_LOCAL)) {
        ck_assert_msg(!d->allowed && !e->allowed && d->retry_after_ns > 0 &&
                          d->retry_after_ns <= e->retry_after_ns && d->wait_ns == 0,
                      "step %d %s: local %d/%llu, core %d/%llu", step, what, d->allowed,
                      (unsigned long long)d->retry_after_ns, e->allowed,
                      (unsigned long long)e->retry_after_ns);
        return;
    }
    ck_assert_msg(d->allowed == e->allowed && d->remaining == e->remaining &&
                      d->retry_after_ns == e->retry_after_ns &&
                      d->reset_after_ns == e->reset_after_ns && d->wait_ns == e->wait_ns &&
                      d->limit == e->limit && d->binding == e->binding && d->flags == e->flags,
                  "step %d %s: store %d/%u/%llu/%llu/w %llu/lim %u/b %u/f %x, core "
                  "%d/%u/%llu/%llu/w %llu/lim %u/b %u/f %x",
                  step, what, d->allowed, d->remaining, (unsigned long long)d->retry_after_ns,
                  (unsigned long long)d->reset_after_ns, (unsigned long long)d->wait_ns,
                  d->limit, d->binding, d->flags, e->allowed, e->remaining,
                  (unsigned long long)e->retry_after_ns, (unsigned long long)e->reset_after_ns,
                  (unsigned long long)e->wait_ns, e->limit, e->binding, e->flags);
}

long long trace_pttl(const char *sock, const char *key)
{
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "PTTL %s", key);
    ck_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

uint32_t trace_min_capacity(const srl_limits *l)
{
    uint32_t m = UINT32_MAX;
    for (uint32_t i = 0; i < l->count; i++) {
        uint32_t c = l->limit[i].burst ? l->limit[i].burst : l->limit[i].permits;
        m = c < m ? c : m;
    }
    return m;
}
