/*
 * redis_cluster.h - what the Redis store needs to talk to a Redis Cluster
 * (internal): hash slots, the slot -> master map, redirections.
 *
 * The store (redis_store.c) owns the connections and the mutex; this part
 * holds no lock of its own: every function on a struct srl__cluster is
 * called under the store's mutex.  The pure parts (CRC16, key slots, slot
 * tags, reply parsing) take no lock and touch no global state but the slot
 * tag table, built once (pthread_once).
 */
#ifndef SRL_REDIS_CLUSTER_H
#define SRL_REDIS_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SRL__SLOTS 16384
#define SRL__CLUSTER_SEEDS 16   /* host:port pairs a uri may list */
#define SRL__CLUSTER_NODES 1024 /* masters a map may name; more: SRL_ECORRUPT */

/* One connection to one server, made lazily (redis_store.c: ensure()). */
struct srl__rconn {
    redisContext *c;          /* NULL: not connected */
    pid_t pid;                /* process that made c: another one re-makes it */
    uint32_t failures;        /* connects failed in a row (backoff) */
    uint64_t retry_at_ns;     /* CLOCK_MONOTONIC: no connect before */
    int last_rc;              /* the last failed connect's code */
    char last_msg[256];       /* its srl_last_error sentence */
    char host[256];           /* TCP host, or "" with the uri's unix path */
    int port;
};

/* The masters and which serves each slot.  node[] holds every master the
 * last CLUSTER SLOTS named plus any a MOVED/ASK named since; slot[s] is an
 * index into node[] plus one, 0 for a slot no master serves (as far as
 * the map knows). */
struct srl__cluster {
    struct srl__rconn *node;
    size_t n, cap;
    uint16_t slot[SRL__SLOTS];
    int stale;                /* a MOVED or a dead node: refresh before the next routing */
};

/* CRC16-XMODEM (poly 0x1021, init 0), as Redis Cluster: "123456789" -> 0x31C3. */
uint16_t srl__crc16(const void *p, size_t n);
/* The slot of a Redis key: the CRC16 of its hash tag (the bytes between
 * the first '{' and the next '}', if not empty) or of the whole key. */
unsigned srl__keyslot(const void *key, size_t n);
/* A short decimal tag whose CRC16 lands on slot: "P:s:{tag}" lives in
 * slot.  Writes at most 8 bytes (NUL included) to buf, returns buf. */
const char *srl__slot_tag(unsigned slot, char buf[8]);

/* Index of the node host:port; added (not connected) if add and absent.
 * -1: absent (or no memory, or SRL__CLUSTER_NODES reached). */
int srl__cluster_node(struct srl__cluster *cl, const char *host, int port, int add);
/* Rebuild the map from a CLUSTER SLOTS reply asked of host (a master
 * shown with an empty address is host).  Nodes no longer named are
 * closed and dropped; the others keep their connections.  0, or
 * SRL_ECORRUPT (a reply of another shape: the map is left as it was) or
 * SRL_ENOMEM. */
int srl__cluster_apply_slots(struct srl__cluster *cl, const redisReply *rep, const char *host);
void srl__cluster_free(struct srl__cluster *cl);

enum srl__redirect { SRL__NO_REDIRECT, SRL__MOVED, SRL__ASK, SRL__TRYAGAIN };
/* What an error reply asks: MOVED/ASK <slot> <host>:<port> (host, port
 * filled; an empty host is left empty), TRYAGAIN (a multi-key command in
 * a slot being migrated: retry shortly), or nothing of that kind. */
enum srl__redirect srl__cluster_redirect(const redisReply *rep, unsigned *slot,
                                         char host[256], int *port);

#endif
