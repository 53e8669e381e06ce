/*
 * redis_lease.c - concurrency units on the Redis store, the host side
 * (redis_lease.h): who holds (host id, pid, start time), the table from a
 * lease back to its Redis key, and concurrency.lua's reply checked.
 *
 * INVARIANTS
 *   - A host id names one boot of one machine's PID namespace (boot_id and
 *     the namespace's inode), so a holder of this host id is judged dead
 *     or alive here exactly by its pid and start time (src/base/proc.c).
 *     Without /proc's boot_id the id is random per process: no unit is then
 *     judged by another process, it comes back by its lease time.
 *   - A table slot with use != 0 holds one unit's key; lease->where[0] is
 *     the slot's use number, unique over the table's life, so a lease of
 *     a slot since freed and reused is refused (SRL_ENOENT), never another
 *     key's unit left.
 *   - Every reply element is untrusted: type, range and text are checked
 *     before any of it is used.
 *
 * LOCKS  The table's own mutex, held only for a table operation (never
 *        across a Redis call).  Touches nothing else.
 */
#include "redis_lease.h"

#include "proc.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The boot id's 32 hex digits (dashes dropped) into out[33], 1; else 0. */
static int boot_id(char out[33])
{
    char buf[64];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    size_t j = 0;
    for (ssize_t i = 0; i < n && j < 32; i++)
        if ((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f'))
            out[j++] = buf[i];
    out[j] = '\0';
    return j == 32;
}

/* A /proc read per srl_enter would be paid by every call: cached per
 * thread, made again when the pid changes (a forked child). */
static void holder_make(struct srl__holder *h);

void srl__holder_self(struct srl__holder *h)
{
    static _Thread_local struct srl__holder self;
    static _Thread_local pid_t made;
    if (made != getpid()) {
        holder_make(&self);
        made = getpid();
    }
    *h = self;
}

static void holder_make(struct srl__holder *h)
{
    struct srl__proc me;
    srl__proc_self(&me);
    char b[33];
    if (boot_id(b) && me.pidns != 0 && me.start != 0) {
        snprintf(h->host, sizeof h->host, "%s-%llx", b, (unsigned long long)me.pidns);
    } else {
        /* Unjudgeable here: an id no other process has. */
        uint64_t r[2] = {0, 0};
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (read(fd, r, sizeof r) != (ssize_t)sizeof r)
                r[0] = 0;
            close(fd);
        }
        snprintf(h->host, sizeof h->host, "p%016llx%016llx-%d", (unsigned long long)r[0],
                 (unsigned long long)(r[1] ^ mono_ns()), (int)me.pid);
    }
    snprintf(h->pid, sizeof h->pid, "%d", (int)me.pid);
    snprintf(h->start, sizeof h->start, "%llu", (unsigned long long)me.start);
}

/* ------------------------------------------------ the lease table */

void srl__lease_table_init(struct srl__lease_table *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
}

void srl__lease_table_free(struct srl__lease_table *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->slot[i].key);
    free(t->slot);
    pthread_mutex_destroy(&t->mu);
}

static uint64_t key_hash(const char *k, size_t kl)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a: a check, not a name */
    for (size_t i = 0; i < kl; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

static void slot_clear(struct srl__lease_slot *s)
{
    free(s->key);
    memset(s, 0, sizeof *s);
}

/* Under mu: a free slot's index, growing or reclaiming; -1 if none. */
static int64_t free_slot(struct srl__lease_table *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (t->slot[i].use == 0)
            return i;
    if (t->n < t->cap)
        return t->n++;
    if (t->cap < SRL__LEASE_TABLE_MAX) {
        uint32_t cap = t->cap ? t->cap * 2 : 16;
        struct srl__lease_slot *s = realloc(t->slot, cap * sizeof *s);
        if (s != NULL) {
            memset(s + t->cap, 0, (cap - t->cap) * sizeof *s);
            t->slot = s;
            t->cap = cap;
            return t->n++;
        }
    }
    /* Full (or no memory): leases never left whose time is over. */
    uint64_t now = mono_ns();
    int64_t got = -1;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->slot[i].until_ns <= now) {
            slot_clear(&t->slot[i]);
            got = got < 0 ? i : got;
        }
    return got;
}

uint64_t srl__lease_nonce(void)
{
    static uint64_t seq;   /* atomic; a forked child goes on from its parent's: its pid differs */
    return __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
}

int srl__lease_put(struct srl__lease_table *t, const char *k, size_t kl, uint32_t gen,
                   uint64_t nonce, uint64_t lease_ns, srl_lease *lease)
{
    char *copy = malloc(kl ? kl : 1);
    if (copy == NULL)
        return SRL_ENOMEM;
    memcpy(copy, k, kl);
    pthread_mutex_lock(&t->mu);
    int64_t i = free_slot(t);
    if (i < 0) {
        pthread_mutex_unlock(&t->mu);
        free(copy);
        return SRL_ENOSPC;
    }
    struct srl__lease_slot *s = &t->slot[i];
    s->use = ++t->uses;
    s->until_ns = mono_ns() + lease_ns;
    s->gen = gen;
    s->nonce = nonce;
    s->len = (uint32_t)kl;
    s->key = copy;
    lease->entry = (uint32_t)i;
    lease->gen = gen;
    lease->where[0] = s->use;
    lease->where[1] = key_hash(k, kl);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

int srl__lease_take(struct srl__lease_table *t, const srl_lease *lease, char **k, size_t *kl,
                    uint64_t *nonce)
{
    int rc = SRL_ENOENT;
    pthread_mutex_lock(&t->mu);
    if (lease->entry < t->n) {
        struct srl__lease_slot *s = &t->slot[lease->entry];
        if (s->use != 0 && s->use == lease->where[0] && s->gen == lease->gen &&
            key_hash(s->key, s->len) == lease->where[1]) {
            *k = s->key;
            *kl = s->len;
            *nonce = s->nonce;
            s->key = NULL;
            slot_clear(s);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* ------------------------------------------------ the reply */

/* e a decimal string of 1..20 digits below 2^64: 1 and *v, else 0. */
static int dec(const char *s, size_t len, uint64_t *v)
{
    if (len < 1 || len > 20)
        return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned dg = (unsigned)(s[i] - '0');
        if (dg > 9 || x > (UINT64_MAX - dg) / 10)
            return 0;
        x = x * 10 + dg;
    }
    *v = x;
    return 1;
}

static int wait_of(const redisReply *e, uint64_t most, uint64_t *v)
{
    return e->type == REDIS_REPLY_STRING && dec(e->str, e->len, v) && *v <= most;
}

/* "GEN PID START" of this host: 1 and the fields, else 0. */
static int holder_of(const redisReply *e, uint64_t f[3])
{
    if (e->type != REDIS_REPLY_STRING || e->len > 64)
        return 0;
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        size_t b = at;
        while (at < e->len && e->str[at] != ' ')
            at++;
        /* Canonical decimals only (no leading zero), as the script writes
         * them: the caller names a dead unit by the text it prints. */
        if (!dec(e->str + b, at - b, &f[i]) || (at - b > 1 && e->str[b] == '0') ||
            (i < 2 && at == e->len))
            return 0;
        at++;   /* the space, or past the end after the last */
    }
    return at == e->len + 1 && f[0] >= 1 && f[0] <= UINT32_MAX && f[1] >= 1 &&
           f[1] <= INT32_MAX;
}

int srl__conc_reply(const redisReply *rep, uint32_t n, uint64_t lease_ns, int peek,
                    srl_decision *d, uint32_t *gen, char *dead, size_t dlen)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 5 || rep->elements > 5 + (size_t)n)
        return 0;
    redisReply *const *e = rep->element;
    for (int i = 0; i < 5; i++)
        if (i != 2 && i != 3 && e[i]->type != REDIS_REPLY_INTEGER)
            return 0;
    long long ok = e[0]->integer, rem = e[1]->integer, g = e[4]->integer;
    uint64_t retry, reset;
    /* A lease is never longer than lease_ns from the server's now. */
    /* A denied enter leaves nothing free; a denied peek of cost > 1 may. */
    if (ok < 0 || ok > 1 || rem < 0 || rem >= (long long)n || (ok == 0 && !peek && rem != 0) ||
        !wait_of(e[2], lease_ns, &retry) || !wait_of(e[3], lease_ns, &reset) ||
        (ok == 1 && retry != 0) || (ok == 0 && retry == 0) || g < 0 || g > UINT32_MAX ||
        (peek ? g != 0 : (ok == 1) != (g != 0)) || ((ok == 1 || peek) && rep->elements != 5))
        return 0;
    uint64_t f[3];
    for (size_t i = 5; i < rep->elements; i++)   /* all checked before dead[] is written */
        if (!holder_of(e[i], f))
            return 0;
    size_t used = strlen(dead);
    struct srl__proc me;
    srl__proc_self(&me);
    for (size_t i = 5; i < rep->elements; i++) {
        (void)holder_of(e[i], f);
        struct srl__proc who = {(int32_t)f[1], f[2], me.pidns};
        if (srl__proc_state(&who) != SRL__PROC_DEAD)
            continue;
        int w = snprintf(dead + used, dlen - used, "%s%llu", used ? " " : "",
                         (unsigned long long)f[0]);
        if (w > 0 && (size_t)w < dlen - used)
            used += (size_t)w;
        else
            dead[used] = '\0';   /* no room: that one waits for the next call */
    }
    *gen = (uint32_t)g;
    *d = (srl_decision){.allowed = ok == 1, .limit = n, .remaining = (uint32_t)rem,
                        .retry_after_ns = retry, .reset_after_ns = reset};
    return 1;
}
