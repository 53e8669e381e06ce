/*
 * redis_cluster.c - hash slots and the slot map of a Redis Cluster, for the
 * Redis store (redis_store.c routes each command with them).
 *
 * WHAT IT HOLDS
 *   - CRC16-XMODEM and the key -> slot rule of Redis Cluster (hash tags).
 *   - The slot tag table: for each of the 16384 slots the smallest number
 *     whose decimal spelling hashes to it, so the store can name a key
 *     "P:s:{tag}" in the slot of any state key (the per-slot hash holding
 *     that slot's clock epoch and counters: see redis_store.c).
 *   - The map: masters (each a lazily made connection) and slot -> master,
 *     rebuilt from CLUSTER SLOTS; the parser of MOVED/ASK/TRYAGAIN.
 *
 * INVARIANTS
 *   - Every reply is untrusted: a CLUSTER SLOTS of another shape (slot out
 *     of range, a port out of range, a host too long) leaves the map as it
 *     was and says SRL_ECORRUPT; a redirection that does not parse is no
 *     redirection (the caller sees an error reply).
 *   - slot[] only names indices below n; dropping a node rewrites slot[].
 *
 * LOCKS
 *   None here: the store calls every map function under its own mutex.
 *   The tag table is built once under pthread_once and read-only after.
 */
#include "redis_cluster.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srl.h"

uint16_t srl__crc16(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(s[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned srl__keyslot(const void *key, size_t n)
{
    const char *k = key;
    const char *open = memchr(k, '{', n);
    if (open != NULL) {
        size_t from = (size_t)(open - k) + 1;
        const char *close = memchr(open + 1, '}', n - from);
        if (close != NULL && close > open + 1)
            return srl__crc16(open + 1, (size_t)(close - open - 1)) & (SRL__SLOTS - 1);
    }
    return srl__crc16(k, n) & (SRL__SLOTS - 1);
}

static uint32_t tag_of[SRL__SLOTS];
static pthread_once_t tags_once = PTHREAD_ONCE_INIT;

/* Every slot is reached by some number below ~200000 (coupon collector
 * over 16384 slots: ~170000 draws expected; the loop runs until all are
 * covered, which CRC16's uniformity on short strings guarantees). */
static void tags_build(void)
{
    unsigned left = SRL__SLOTS;
    static unsigned char have[SRL__SLOTS];
    for (uint32_t i = 0; left > 0; i++) {
        char b[12];
        int len = snprintf(b, sizeof b, "%u", i);
        unsigned s = srl__crc16(b, (size_t)len) & (SRL__SLOTS - 1);
        if (!have[s]) {
            have[s] = 1;
            tag_of[s] = i;
            left--;
        }
    }
}

const char *srl__slot_tag(unsigned slot, char buf[8])
{
    pthread_once(&tags_once, tags_build);
    snprintf(buf, 8, "%u", tag_of[slot & (SRL__SLOTS - 1)]);
    return buf;
}

int srl__cluster_node(struct srl__cluster *cl, const char *host, int port, int add)
{
    for (size_t i = 0; i < cl->n; i++)
        if (cl->node[i].port == port && strcmp(cl->node[i].host, host) == 0)
            return (int)i;
    if (!add || cl->n >= SRL__CLUSTER_NODES || strlen(host) >= sizeof cl->node[0].host)
        return -1;
    if (cl->n == cl->cap) {
        size_t cap = cl->cap ? 2 * cl->cap : 8;
        struct srl__rconn *nn = realloc(cl->node, cap * sizeof *nn);
        if (nn == NULL)
            return -1;
        cl->node = nn;
        cl->cap = cap;
    }
    struct srl__rconn *c = &cl->node[cl->n];
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    return (int)cl->n++;
}

/* One master entry [ip, port, ...] of a CLUSTER SLOTS range: 1 if it is
 * well formed (*host, *port set; an empty ip is the asked host). */
static int master_of(const redisReply *m, const char *asked, const char **host, int *port)
{
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
        m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER ||
        m->element[1]->integer < 1 || m->element[1]->integer > 65535 ||
        m->element[0]->len >= sizeof ((struct srl__rconn *)0)->host)
        return 0;
    *host = m->element[0]->len == 0 || strcmp(m->element[0]->str, "?") == 0
                ? asked : m->element[0]->str;
    *port = (int)m->element[1]->integer;
    return 1;
}

int srl__cluster_apply_slots(struct srl__cluster *cl, const redisReply *rep, const char *host)
{
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY)
        return SRL_ECORRUPT;
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *r = rep->element[i];
        const char *h;
        int p;
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_INTEGER || r->element[0]->integer < 0 ||
            r->element[1]->integer >= SRL__SLOTS ||
            r->element[0]->integer > r->element[1]->integer ||
            !master_of(r->element[2], host, &h, &p))
            return SRL_ECORRUPT;
    }
    /* The reply is sound: the new map.  Nodes are matched by host:port, so
     * a master that stays keeps its connection. */
    uint16_t *slot = calloc(SRL__SLOTS, sizeof *slot);
    unsigned char *used = NULL;
    if (slot == NULL)
        return SRL_ENOMEM;
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *r = rep->element[i];
        const char *h = NULL;
        int p = 0;
        (void)master_of(r->element[2], host, &h, &p);   /* checked above: it answers */
        int ix = srl__cluster_node(cl, h, p, 1);
        if (ix < 0) {
            free(slot);
            return SRL_ENOMEM;
        }
        for (long long s = r->element[0]->integer; s <= r->element[1]->integer; s++)
            slot[s] = (uint16_t)(ix + 1);
    }
    /* Drop the nodes no slot names (closing their connections), renumbering. */
    used = calloc(cl->n + 1, 1);
    int *renum = calloc(cl->n + 1, sizeof *renum);
    if (used == NULL || renum == NULL) {
        free(used);
        free(renum);
        free(slot);
        return SRL_ENOMEM;
    }
    for (size_t s = 0; s < SRL__SLOTS; s++)
        if (slot[s])
            used[slot[s] - 1] = 1;
    size_t k = 0;
    for (size_t i = 0; i < cl->n; i++) {
        if (!used[i]) {
            if (cl->node[i].c != NULL)
                redisFree(cl->node[i].c);
            continue;
        }
        cl->node[k] = cl->node[i];
        renum[i] = (int)++k;
    }
    cl->n = k;
    for (size_t s = 0; s < SRL__SLOTS; s++)
        cl->slot[s] = slot[s] ? (uint16_t)renum[slot[s] - 1] : 0;
    cl->stale = 0;
    free(used);
    free(renum);
    free(slot);
    return 0;
}

void srl__cluster_free(struct srl__cluster *cl)
{
    for (size_t i = 0; i < cl->n; i++)
        if (cl->node[i].c != NULL)
            redisFree(cl->node[i].c);
    free(cl->node);
    cl->node = NULL;
    cl->n = cl->cap = 0;
}

enum srl__redirect srl__cluster_redirect(const redisReply *rep, unsigned *slot,
                                         char host[256], int *port)
{
    if (rep == NULL || rep->type != REDIS_REPLY_ERROR)
        return SRL__NO_REDIRECT;
    if (strncmp(rep->str, "TRYAGAIN", 8) == 0)
        return SRL__TRYAGAIN;
    enum srl__redirect kind;
    const char *s;
    if (strncmp(rep->str, "MOVED ", 6) == 0) {
        kind = SRL__MOVED;
        s = rep->str + 6;
    } else if (strncmp(rep->str, "ASK ", 4) == 0) {
        kind = SRL__ASK;
        s = rep->str + 4;
    } else {
        return SRL__NO_REDIRECT;
    }
    /* "<slot> <host>:<port>", the port after the last ':' (an IPv6 host
     * has colons of its own). */
    char *end;
    unsigned long sl = strtoul(s, &end, 10);
    if (end == s || *end != ' ' || sl >= SRL__SLOTS)
        return SRL__NO_REDIRECT;
    const char *hp = end + 1, *colon = strrchr(hp, ':');
    if (colon == NULL || (size_t)(colon - hp) >= 256)
        return SRL__NO_REDIRECT;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || p < 1 || p > 65535)
        return SRL__NO_REDIRECT;
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = '\0';
    *slot = (unsigned)sl;
    *port = (int)p;
    return kind;
}
