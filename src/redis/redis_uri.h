/*
 * redis_uri.h - the parsed form of a Redis store's uri (internal).
 *
 * Parsing is pure (no I/O, no allocation), so it is built with or without
 * hiredis and srl_redis_uri_check() can explain a bad uri on any build.
 */
#ifndef SRL_REDIS_URI_H
#define SRL_REDIS_URI_H

#include <stdint.h>
#include <stddef.h>

#define SRL__REDIS_PREFIX_MAX 128
#define SRL__REDIS_SEEDS 16       /* host:port pairs a redis-cluster:// uri may list */

struct srl__redis_uri {
    char unix_path[256];      /* "" for TCP */
    char host[256];           /* TCP host (brackets of [v6] removed) */
    int port;                 /* TCP port, default 6379 */
    char user[128];           /* "" : AUTH password only (or no AUTH) */
    char password[256];       /* "" : no AUTH */
    int db;                   /* SELECT db when > 0 */
    uint32_t timeout_ms;      /* 0: not given (the config's lock_timeout_ms) */
    char prefix[SRL__REDIS_PREFIX_MAX + 1];   /* default "srl" */
    int cluster;              /* redis-cluster://: host, port is seed[0] */
    int sentinel;             /* redis-sentinel://: seed[] are the sentinels, host and
                                 port the master they name (redis_sentinel.c) */
    char master[128];         /* sentinel: the master's name */
    int nseeds;               /* cluster, sentinel: seeds listed (1..SRL__REDIS_SEEDS) */
    struct {
        char host[256];
        int port;
    } seed[SRL__REDIS_SEEDS];
};

/* 0, or SRL_EINVAL with why[] (may be NULL) naming the bad part. */
int srl__redis_uri_parse(const char *uri, struct srl__redis_uri *u, char *why, size_t whylen);

#endif
