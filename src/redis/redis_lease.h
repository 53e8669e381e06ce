/*
 * redis_lease.h - what the Redis store needs to hold concurrency units
 * (redis_lease.c), internal: the caller's holder id, the table that maps
 * a lease back to its key, and concurrency.lua's reply parsed as untrusted.
 */
#ifndef SRL_REDIS_LEASE_H
#define SRL_REDIS_LEASE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "srl.h"

/* The holder text of the calling process: "HOST PID START" as
 * concurrency.lua stores it (host: the boot id and the PID namespace, so
 * that pid and start time judge a process exactly; without a boot id, a
 * random id per process: then no other process judges its units, which
 * come back by the lease time only). */
#define SRL__HOLDER_MAX 96
struct srl__holder {
    char host[64];
    char pid[12];
    char start[24];
};
void srl__holder_self(struct srl__holder *h);

/* The keys of this handle's held units: srl_lease holds no key, so
 * lease->entry is a slot here and where[0] its use count (a stale lease
 * of a reused slot does not match), where[1] a hash of the key.  Bounded
 * (SRL__LEASE_TABLE_MAX slots); a slot is freed by leave, or when full by
 * reclaiming those whose lease time has passed (a lease never left). */
#define SRL__LEASE_TABLE_MAX SRL_REDIS_LEASES_MAX
struct srl__lease_slot {
    uint64_t use;             /* 0: free */
    uint64_t until_ns;        /* CLOCK_MONOTONIC: the unit's lease ends */
    uint64_t nonce;           /* the unit's in its Redis entry */
    uint32_t gen;
    uint32_t len;
    char *key;                /* the Redis key P:k:<key>, malloc'd */
};
struct srl__lease_table {
    pthread_mutex_t mu;
    struct srl__lease_slot *slot;
    uint32_t n, cap;
    uint64_t uses;
};
void srl__lease_table_init(struct srl__lease_table *t);
void srl__lease_table_free(struct srl__lease_table *t);
/* A number this process never gave before (a unit's nonce).  Thread-safe. */
uint64_t srl__lease_nonce(void);
/* Record Redis key k held as gen (with nonce) for lease_ns; fill lease's
 * entry, gen, where.  0, or SRL_ENOMEM / SRL_ENOSPC (the table is full of
 * live leases). */
int srl__lease_put(struct srl__lease_table *t, const char *k, size_t kl, uint32_t gen,
                   uint64_t nonce, uint64_t lease_ns, srl_lease *lease);
/* Take the lease's slot out of the table: 0 with *k (malloc'd, the
 * caller frees), *kl and *nonce, or SRL_ENOENT (no such slot, or another
 * use). */
int srl__lease_take(struct srl__lease_table *t, const srl_lease *lease, char **k, size_t *kl,
                    uint64_t *nonce);

/* concurrency.lua's enter or peek reply (a peek's denial may leave units
 * free: its remaining; an enter's is 0), checked against N and the lease
 * time: 1 with *d filled, *gen (0 on denial) and, on a denial, the
 * generations of this host's units whose process is dead appended to
 * dead[] (space-separated, at most dlen bytes with NUL); else 0. */
struct redisReply;
int srl__conc_reply(const struct redisReply *rep, uint32_t n, uint64_t lease_ns, int peek,
                    srl_decision *d, uint32_t *gen, char *dead, size_t dlen);

#endif
