/*
 * redis_sentinel.h - asking Redis Sentinel where a master is (internal;
 * redis_sentinel.c).  Plain sockets, no hiredis: the reply parser is pure
 * and fuzzed (tests/fuzz/fuzz_sentinel_reply.c).
 */
#ifndef SRL_REDIS_SENTINEL_H
#define SRL_REDIS_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include "redis_uri.h"

/* The longest reply srl reads from a sentinel: "*2", two bulk headers, a
 * host of 255 bytes and a port of 5 digits, their CRLFs.  A longer one is
 * refused (a sentinel's answer to get-master-addr-by-name is never longer). */
#define SRL__SENTINEL_REPLY_MAX 300u

/* Parse the reply buf[0..n) to SENTINEL get-master-addr-by-name: 1 while it
 * is incomplete (read more, if n < SRL__SENTINEL_REPLY_MAX); 0 with
 * host[] (1..255 bytes of [A-Za-z0-9._:-], NUL-terminated) and *port
 * (1..65535) set; SRL_ENOENT (the sentinel knows no such master); or
 * SRL_ESYS with why[] naming what is wrong (an error reply, quoted; not
 * the reply's shape; a bad host or port; too long).  Pure. */
int srl__sentinel_parse(const char *buf, size_t n, char host[256], int *port, char *why,
                        size_t wl);

/* Ask u's sentinels, in turn, from *next (updated to the one that
 * answered, so the next ask starts there), where u->master is, each
 * within a share of the time left before deadline_ns (CLOCK_MONOTONIC).
 * 0 with host, port; else SRL_ETIMEDOUT (the deadline passed) or SRL_ESYS,
 * and srl_last_error names each sentinel asked and what it did. */
int srl__sentinel_master(const struct srl__redis_uri *u, uint64_t deadline_ns, int *next,
                         char host[256], int *port);

#endif
