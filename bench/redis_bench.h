/*
 * redis_bench.h - what the Redis files of srl-bench share (only built with
 * hiredis): redis.c starts the private server and calls the sections on
 * it, redis_tiered.c and redis_compound.c.
 */
#ifndef SRL_BENCH_REDIS_BENCH_H
#define SRL_BENCH_REDIS_BENCH_H

#include "bench.h"

#include <hiredis/hiredis.h>

/* SCRIPT LOAD lua on c: its sha into sha (at least 41 bytes) and 0, or -1
 * with why filled (the server's error, or hiredis's). */
int bench_redis_script_load(redisContext *c, const char *lua, char *sha, size_t shalen,
                            char *why, size_t whylen);

/* redis_tiered.c: srl_open_redis and srl_open_tiered on this server. */
void bench_tiered_run(redisContext *c, const char *sock, bench_tiered_result *out);

/* redis_compound.c: a compound on srl's Redis store against a hand-written
 * script, and srl_open_redis's answer for a concurrency policy. */
void bench_compound_run(const bench_opts *o, const bench_keys *k, const bench_seq *seq,
                        redisContext *c, const char *sock, bench_compound_result *out);

#endif
