/*
 * trace_stores.h - the stores a differential trace runs on, for the suites
 * that compare the shared, Redis and fronted stores with the core
 * (check_trace_compound, check_trace_reserve; trace_stores.c).
 *
 * A store is opened on a fake ticker; a Redis or fronted one on a
 * redis-server the suite starts on a unix socket in its own temporary
 * directory, with the ticker's time passed to the scripts (test hooks
 * srl__redis_fixed_time, srl__tiered_redis: link srl_mutants_dep), so the
 * core and the server see one clock.  Closing stops the server by its pid
 * and unlinks the segment.
 */
#ifndef SRL_TRACE_STORES_H
#define SRL_TRACE_STORES_H

#include <sys/types.h>

#include "srl.h"
#include "testutil.h"

enum { STORE_SHARED, STORE_REDIS, STORE_TIERED, STORES };

struct trace_store {
    srl_limiter *lim;
    int kind;
    char name[64];         /* the segment (shared, fronted), "" if none */
    pid_t server;          /* redis-server (Redis, fronted), 0 if none */
    char dir[64], sock[96];
};

/* text as srl_limits, or fail the test naming the error. */
srl_limits trace_parse(const char *text);
/* Start a redis-server for st (dir /tmp/srl-TAG-XXXXXX, its socket in it). */
void trace_server_start(struct trace_store *st, const char *tag);
/* A store of kind with limits l, capacity 100, on clk: its segment named
 * unique_name(tag), its Redis key prefix `prefix`. */
struct trace_store trace_store_open(int kind, const srl_limits *l, fake_clock *clk,
                                    const char *tag, const char *prefix);
void trace_store_close(struct trace_store *st);
/* d (the store's) equals e (the core's), field by field, wait_ns too; a
 * fronted store's local answer (SRL_DECISION_LOCAL) is a denial the core
 * gives too, with a retry_after no longer than the core's (the host
 * remembers a shorter wait: srl.h, srl_open_tiered).  what and step name
 * the call in the failure. */
void trace_same(int kind, const srl_decision *d, const srl_decision *e, int step,
                const char *what);
/* The Redis key's PTTL in ms (-2: none), asked on sock. */
long long trace_pttl(const char *sock, const char *key);
/* The least capacity (burst, else permits) of l's limits. */
uint32_t trace_min_capacity(const srl_limits *l);

#endif
