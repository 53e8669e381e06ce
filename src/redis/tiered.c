/*
 * tiered.c - srl_open_tiered: the fleet's limit decided on Redis, with the
 * host's shared segment in front remembering the fleet's denials.
 *
 * WHAT IT HOLDS
 *   A tiered limiter is two limiters behind one facade head: `redis` (an
 *   srl_open_redis handle: every admission is its decision) and `host` (an
 *   srl_open_shared handle on the host segment: every worker of the host
 *   sees the same memory).  The host segment is an ordinary segment (no
 *   layout of its own) whose policy is HOST_POLICY, gcra:1/3660d with
 *   penalty=3660d; a key's state there is a "ban" (struct ban below):
 *     cost   the GCRA word: the smallest cost Redis denied in its low 32
 *            bits, the tier it was denied under in bits 32..39 (any word
 *            <= now is a GCRA state at rest, so for GCRA the word is free
 *            while it stays below the clock: a monotonic clock passes
 *            16 x 2^32 ns after 69 s of uptime, and an injected ticker
 *            below it only delays the ban's eviction);
 *     until  the penalty's end: T, the end of the fleet's denial in host
 *            time.
 *   A key's entry in the host segment is named "P:key", P the Redis key
 *   prefix: limiters of two prefixes (two fleets, two policies) may share a
 *   host segment without one's bans answering the other's keys.  A name
 *   longer than SRL_KEY_MAX (a key near it plus P) is its srl_key_fit form
 *   (keyfit.c), so it passes the segment's key length rule.  The segment
 *   keeps a display copy (HOST_KEY_DISPLAY bytes unless cfg says how many):
 *   rlctl list shows "P:KEY".
 *   Read with the segment's own semantics (rlctl list/get on it) a ban is a
 *   key denied with retry_after T - now, at rest at T, valid while
 *   T <= now + 3660d: eviction, crash repair and srl_check need nothing new.
 *   The state is written only through srl__shm_apply (shm_table.c) under the
 *   key's bucket lock and undo record.
 *   With fallback=POLICY, a third handle `fb` on the segment NAME.fallback
 *   (fallback.c) decides, under the same host key, the calls Redis gave no
 *   answer to.
 *
 * INVARIANTS
 *   - The host only ever denies.  So the fleet admits exactly what Redis
 *     admits, never more (docs/design.md, "The host tier", has the proof
 *     that a local denial is one Redis would give).
 *   - A ban (c, T) is stored only from a Redis denial of cost c whose
 *     retry_after R was measured from a host time t0 read before the request
 *     was sent: T = t0 + R.  It answers cost >= c only, and only while
 *     now < T.  A key holds one ban; a new one replaces it if the old one
 *     ended, or has a larger cost, or the same cost and an earlier end: each
 *     ban kept is one Redis gave, so any choice is safe.
 *   - Degraded and untracked answers are never remembered.
 *   - A ban answers requests of its own tier only (a plain peek: any, the
 *     key's tier being the one it was last decided under).  Redis converts
 *     a key that a request of another tier moves (tiers.c), so a ban stops
 *     being one Redis would give: a decision that writes (acquire, reserve)
 *     under another tier forgets it.  A ban written by a request of the old
 *     tier that raced the move may outlive it, denying until its T at most:
 *     more denial, never an admission Redis did not give (as a refund's
 *     other hosts keep theirs).
 *
 * LOCKS
 *   None of its own: the host segment's bucket lock (srl__shm_apply) and the
 *   Redis store's connection mutex, never both at once (the host is asked,
 *   released, then Redis is asked, then the host is written).
 */
#include "config.h"
#include "errdetail.h"
#include "fallback.h"
#include "redis_uri.h"
#include "shm.h"

#include <stdlib.h>
#include <string.h>

#define HOST_POLICY "gcra:1/3660d,penalty=3660d"

/* The host segment's display copy when cfg asks for none: rlctl list on it
 * shows "P:KEY" (its first 64 bytes), not a fingerprint.  mod_srl and PHP
 * refuse key_display with redis=, so without this default their host
 * segments could never be read by key. */
#define HOST_KEY_DISPLAY 64u

/* The host policy's state: GCRA's word, then the penalty's end (penalty.c
 * puts `until` after the algorithm's state, rounded to 8 bytes). */
struct ban {
    uint64_t cost;
    uint64_t until;
};

/* struct ban's cost word: a cost and the tier it was denied under. */
#define BAN_COST(w) ((uint32_t)(w))
#define BAN_TIER(w) ((uint32_t)((w) >> 32))
#define BAN_WORD(cost, tier) ((uint64_t)(cost) | (uint64_t)(tier) << 32)

/* The longest host key: "P:" then the key. */
#define HOST_KEY_MAX (SRL__REDIS_PREFIX_MAX + 1 + SRL_KEY_MAX)

struct tiered {
    srl_limiter lim;            /* first: the facade's head */
    srl_limiter *redis;
    srl_limiter *host;
    srl_limiter *fb;            /* fallback=POLICY's segment (fallback.c), or NULL */
    size_t plen;                /* bytes of prefix[] used */
    char prefix[SRL__REDIS_PREFIX_MAX + 1];   /* "P:", not NUL-terminated */
};

static struct tiered *tr_of(srl_limiter *lim) { return lim->impl; }

/* A key's name in the host segment, and the room to make it in. */
struct host_name {
    char raw[HOST_KEY_MAX];              /* "P:key" */
    unsigned char fit[SRL_KEY_MAX];      /* srl_key_fit's form of a longer raw */
};

/* key's name in the host segment: "P:key", or, when that is longer than
 * SRL_KEY_MAX (a key near SRL_KEY_MAX plus the prefix), its srl_key_fit
 * form, so the segment's key length rule (srl__shm_slot_len_ok) holds and
 * srl_check and repair keep the ban; *hlen its length.  key is 1..SRL_KEY_MAX
 * bytes (the facade's check). */
static const void *host_key(const struct tiered *t, const void *key, size_t len,
                            struct host_name *n, size_t *hlen)
{
    memcpy(n->raw, t->prefix, t->plen);
    memcpy(n->raw + t->plen, key, len);
    *hlen = t->plen + len;
    return srl_key_fit(n->raw, hlen, n->fit);
}


/* ----------------------------------------------------- the host memory */

/* ANY_TIER: a plain peek, which Redis decides under the key's own tier. */
#define ANY_TIER UINT32_MAX

struct ask {
    uint32_t cost;
    uint32_t tier;              /* the request's, or ANY_TIER */
    uint32_t tiers;             /* the table's size: a ban of a tier beyond is garbage */
    int count;                  /* a decision (acquire) or a look (peek) */
    uint64_t left;              /* out: ns until the ban ends, 0 none */
    uint64_t over;              /* answer only a ban longer than this (srl_reserve's
                                   max_wait; 0 for the others) */
    uint32_t ban_tier;          /* out: the answering ban's tier */
    int other;                  /* out: a live ban of another tier is kept */
};

static int ask_fn(void *state, uint64_t now, void *ctx)
{
    const struct ban *b = state;
    struct ask *a = ctx;
    /* Untrusted bytes: a ban no Redis denial could leave (cost 0, a tier
     * beyond the table, an end past the longest window) is ignored, so
     * garbage costs a round trip, never a denial Redis would not give. */
    uint32_t cost = BAN_COST(b->cost), tier = BAN_TIER(b->cost);
    if (cost == 0 || tier >= a->tiers || b->until > srl__sat_add(now, SRL_WINDOW_MAX_NS))
        return 0;
    if (b->until <= now)
        return 0;
    if (a->tier != ANY_TIER && tier != a->tier) {
        a->other = 1;
        return 0;
    }
    if (cost <= a->cost && b->until - now > a->over) {
        a->left = b->until - now;
        a->ban_tier = tier;
    }
    return a->left != 0 && a->count;
}

/* 1 and *d filled if the host answers (key, cost) under tier: a ban of
 * that tier covers it for longer than over, and the request may retry over
 * before its end.  *other: a live ban of another tier was found (the
 * decision Redis now makes under tier moves the key: forget_other). */
static int host_answer(struct tiered *t, uint32_t tier, const void *key, size_t len,
                       uint32_t cost, int count, uint64_t over, srl_decision *d, int *other)
{
    struct ask a = {.cost = cost, .tier = tier, .tiers = t->lim.tier_count, .count = count,
                    .over = over};
    struct host_name n;
    size_t hlen;
    const void *hk = host_key(t, key, len, &n, &hlen);
    int rc = srl__shm_apply(t->host, hk, hlen, 0, ask_fn, &a);
    if (other != NULL)
        *other = rc == 0 && a.other;
    if (rc != 0 || a.left == 0)
        return 0;   /* no ban, or the host is unusable: Redis decides */
    *d = (srl_decision){
        .allowed = 0,
        .limit = srl__capacity(&srl__tier_cmp(&t->lim, a.ban_tier)->limits.limit[0]),
        .remaining = 0,
        .retry_after_ns = a.left - over,
        .reset_after_ns = a.left,
        .flags = SRL_DECISION_LOCAL,
    };
    return 1;
}

static int remember_fn(void *state, uint64_t now, void *ctx)
{
    struct ban *b = state;
    const struct ban *n = ctx;
    /* (a garbage word compares as any other: the new ban is one Redis gave) */
    if (b->until <= now || BAN_TIER(n->cost) != BAN_TIER(b->cost) ||
        BAN_COST(n->cost) < BAN_COST(b->cost) ||
        (BAN_COST(n->cost) == BAN_COST(b->cost) && n->until > b->until))
        *b = *n;
    return 0;
}

/* Redis denied cost under tier at t0 + its retry_after: remember it (best
 * effort: a full table or a lock error leaves the key to Redis). */
static void host_remember(struct tiered *t, uint32_t tier, const void *key, size_t len,
                          uint32_t cost, uint64_t t0, const srl_decision *d)
{
    uint64_t wait = d->retry_after_ns < SRL_WINDOW_MAX_NS ? d->retry_after_ns : SRL_WINDOW_MAX_NS;
    struct ban n = {BAN_WORD(cost, tier), srl__sat_add(t0, wait)};
    struct host_name hn;
    size_t hlen;
    const void *hk = host_key(t, key, len, &hn, &hlen);
    (void)srl__shm_apply(t->host, hk, hlen, 1, remember_fn, &n);
}

/* Forget key's ban on this host: 0, or SRL_ENOENT if it had none. */
static int host_forget(struct tiered *t, const void *key, size_t len)
{
    struct host_name n;
    size_t hlen;
    const void *hk = host_key(t, key, len, &n, &hlen);
    return srl__shm_reset_key(t->host, hk, hlen);
}

/* Redis did not answer: the fallback segment decides (fallback.c). */
static int fallback(struct tiered *t, const void *key, size_t len, uint32_t cost, int count,
                    srl_decision *d)
{
    struct host_name n;
    size_t hlen;
    const void *hk = host_key(t, key, len, &n, &hlen);
    return srl__fallback_decide(t->fb, hk, hlen, cost, count, d);
}

/* ------------------------------------------------------------ the ops */

/* Redis decided (rc, *d) under tier a request that moved the key from the
 * tier of a ban kept (ask.other): that ban is no longer one Redis would
 * give.  A denial under tier replaces it (remember_fn); else it goes. */
static void forget_other(struct tiered *t, const void *key, size_t len, int rc,
                         const srl_decision *d)
{
    if (rc != 0 || d->allowed || d->flags != 0 || d->retry_after_ns == 0)
        (void)host_forget(t, key, len);
}

static int tr_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                           uint32_t cost, srl_decision *d)
{
    struct tiered *t = tr_of(lim);
    int other;
    if (host_answer(t, tier, key, len, cost, 1, 0, d, &other))
        return 0;
    uint64_t t0 = srl__now(lim);   /* before the request leaves: T never outlives Redis's ban */
    int rc = srl_acquire_tier(t->redis, tier, key, len, cost, d);
    if (t->fb != NULL && srl__fallback_applies(rc))
        return fallback(t, key, len, cost, 1, d);
    if (other)
        forget_other(t, key, len, rc, d);
    if (rc == 0 && !d->allowed && d->flags == 0 && d->retry_after_ns > 0)
        host_remember(t, tier, key, len, cost, t0, d);
    return rc;
}

static int tr_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                      srl_decision *d)
{
    return tr_acquire_tier(lim, 0, key, len, cost, d);
}

/* A look writes nothing, on Redis or here: a ban of another tier stays. */
static int tr_peek_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                        uint32_t cost, srl_decision *d)
{
    struct tiered *t = tr_of(lim);
    if (host_answer(t, tier, key, len, cost, 0, 0, d, NULL))
        return 0;
    int rc = tier == ANY_TIER ? srl_peek(t->redis, key, len, cost, d)
                              : srl_peek_tier(t->redis, tier, key, len, cost, d);
    if (t->fb != NULL && srl__fallback_applies(rc))
        return fallback(t, key, len, cost, 0, d);
    return rc;
}

static int tr_peek(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                   srl_decision *d)
{
    return tr_peek_tier(lim, ANY_TIER, key, len, cost, d);
}

/* srl_reserve: Redis's wait is at least a ban's rest (it is the acquire's
 * retry_after), so a ban longer than max_wait refuses here; anything else
 * is Redis's.  A refusal's retry_after is not the acquire's: not
 * remembered. */
static int tr_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                      uint64_t max_wait, srl_decision *d)
{
    struct tiered *t = tr_of(lim);
    int other;
    if (host_answer(t, 0, key, len, cost, 1, max_wait, d, &other))
        return 0;
    int rc = srl_reserve(t->redis, key, len, cost, max_wait, d);   /* tier 0's */
    if (other)
        (void)host_forget(t, key, len);   /* its refusals are never remembered */
    return rc;
}

/* Permits given back on Redis may end the fleet's denial before T: this
 * host forgets its ban (other hosts keep theirs until T at most). */
static int tr_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost)
{
    struct tiered *t = tr_of(lim);
    int rc = srl_refund(t->redis, key, len, cost);
    (void)host_forget(t, key, len);
    return rc;
}

static int tr_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    struct tiered *t = tr_of(lim);
    int rc = srl_reset_key(t->redis, key, len);
    int h = host_forget(t, key, len);
    if (t->fb != NULL) {
        struct host_name n;
        size_t hlen;
        const void *hk = host_key(t, key, len, &n, &hlen);
        (void)srl_reset_key(t->fb, hk, hlen);
    }
    return rc == SRL_ENOENT && h == 0 ? 0 : rc;
}

static int64_t tr_evict_idle(srl_limiter *lim)
{
    return srl_evict_idle(tr_of(lim)->host);
}

static int tr_stats(srl_limiter *lim, srl_stats *out)
{
    struct tiered *t = tr_of(lim);
    srl_stats r, h;
    int rc = srl_stats_get(t->redis, &r);
    if (rc == 0)
        rc = srl_stats_get(t->host, &h);
    if (rc != 0)
        return rc;
    *out = (srl_stats){
        .capacity = h.capacity,
        .used = h.used,
        .allowed = r.allowed,
        .denied = r.denied,
        .full = h.full,
        .recovered = h.recovered,
        .reset_slots = h.reset_slots,
        .evicted = h.evicted,
        .timeouts = r.timeouts + h.timeouts,
        .local_denied = h.denied,
        .would_deny = r.would_deny,   /* the fleet's (the host never denies in a dry run) */
    };
    return 0;
}

static int tr_info(srl_limiter *lim, srl_info *out)
{
    struct tiered *t = tr_of(lim);
    srl_info h;
    int rc = srl_info_get(t->redis, out);
    if (rc == 0)
        rc = srl_info_get(t->host, &h);
    if (rc != 0)
        return rc;
    out->kind = SRL_STORE_FRONTED;
    out->flags = 0;   /* host_config opens the host handle without any flag */
    out->capacity = h.capacity;
    out->slots_per_bucket = h.slots_per_bucket;
    out->buckets = h.buckets;
    out->segment_bytes = h.segment_bytes;
    out->slot_bytes = h.slot_bytes;
    out->mode = h.mode;
    out->owner_uid = h.owner_uid;
    out->creator_pid = h.creator_pid;
    out->file_bytes = h.file_bytes;
    out->layout_version = h.layout_version;
    memcpy(out->name, h.name, sizeof out->name);
    return 0;
}

static int64_t tr_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
{
    return srl_foreach(tr_of(lim)->redis, fn, ctx);
}

static int64_t tr_check(srl_limiter *lim, srl_report_fn fn, void *ctx)
{
    return srl_check(tr_of(lim)->host, fn, ctx);
}

static void tr_close(srl_limiter *lim)
{
    struct tiered *t = tr_of(lim);
    srl_close(t->redis);
    srl_close(t->host);
    srl_close(t->fb);
    free(t);
}

static const struct srl__store_ops tiered_ops = {
    .acquire = tr_acquire,
    .acquire_tier = tr_acquire_tier,
    .peek = tr_peek,
    .peek_tier = tr_peek_tier,
    .refund = tr_refund,
    .reserve = tr_reserve,
    .reset_key = tr_reset_key,
    .evict_idle = tr_evict_idle,
    .stats = tr_stats,
    .info = tr_info,
    .foreach = tr_foreach,
    .check = tr_check,
    .close = tr_close,
};

/* ------------------------------------------------------------ opening */

/* The host segment's config: HOST_POLICY in cfg's geometry and trust, on
 * the ticker the tiered head reads (T and now must be one clock). */
static int host_config(const srl_config *cfg, srl_ticker ticker, srl_config *h)
{
    srl_config_init(h);
    if (srl_policy_parse(HOST_POLICY, &h->policy) != 0 ||
        srl_state_size(&h->policy) != sizeof(struct ban))
        return SRL_EPOLICY;
    h->capacity = cfg->capacity;
    h->key_display = cfg->key_display != 0 ? cfg->key_display : HOST_KEY_DISPLAY;
    h->mode = cfg->mode;
    h->on_full = cfg->on_full;
    h->lock_timeout_ms = cfg->lock_timeout_ms;
    h->owner_uid = cfg->owner_uid;
    h->ticker = ticker;
    return 0;
}

/* srl.h: the store's name from 0.2 ("tier" is srl_tier's word only);
 * srl_open_tiered below stays its old name until 1.0. */
int srl_open_fronted(const char *shm_name, const char *uri, const srl_config *cfg, unsigned flags,
                     srl_limiter **out)
{
    return srl_open_tiered(shm_name, uri, cfg, flags, out);
}

/* An adopted segment must be a host segment: HOST_POLICY, one limit. */
static int host_is_ours(srl_limiter *host, const srl_config *h)
{
    srl_info in;
    int rc = srl_info_get(host, &in);
    if (rc != 0)
        return rc;
    if (in.limits.count != 1 || memcmp(&in.limits.limit[0], &h->policy, sizeof h->policy) != 0 ||
        in.state_bytes != sizeof(struct ban))
        return SRL_EMISMATCH;
    return 0;
}

/* srl_last_error for a host segment that refused the open: the segment's
 * name and the code's text, replacing a Redis sentence the open may have
 * left (a server that is down does not fail an open); "" for SRL_EACCES,
 * whose sentence (owner, mode, fix: over 256 bytes) is srl_open_explain's. */
static void host_detail(const char *shm_name, int rc)
{
    if (rc == SRL_EACCES)
        srl__err_clear();
    else
        srl__err_set("host segment %s%.200s: %s", shm_name[0] == '/' ? "" : "/", shm_name,
                     srl_strerror(rc));
}

int srl_open_tiered(const char *shm_name, const char *uri, const srl_config *cfg,
                    unsigned flags, srl_limiter **out)
{
    srl_config norm;
    const srl_config *use;
    int rc = srl__open_prologue(cfg, 0, &norm, &use, out);
    if (rc != 0)
        return rc;
    if (shm_name == NULL || uri == NULL)
        return SRL_EINVAL;
    rc = srl_name_check(shm_name);
    if (rc == 0 && use->limits.count == 1 && use->limits.limit[0].algorithm == SRL_CONCURRENCY) {
        /* Units are Redis's to give back, and a unit free now is free for
         * every host: no denial is worth remembering, so no host segment is
         * made and the Redis store itself is the limiter (srl.h). */
        srl_limits fbl;
        if (srl__config_fallback(use, &fbl)) {
            srl__err_set("fallback= is for rate limits: a concurrency limit on Redis keeps no "
                         "host segment to decide by");
            return SRL_EPOLICY;
        }
        return srl_open_redis(uri, use, out);
    }
    for (uint32_t i = 0; rc == 0 && i < use->limits.count; i++)   /* normalised: count >= 1 */
        if (use->limits.limit[i].algorithm == SRL_CONCURRENCY) {
            /* The host's remembered denials hold no units to give back. */
            srl__err_set("a concurrency limit in a compound is not taken by the fronted store "
                         "(nor by Redis yet): give it a limiter of its own, or use a segment");
            return SRL_ENOTSUP;
        }
    srl_limits fbl;
    const srl_limits *fbp = srl__config_fallback(use, &fbl) ? &fbl : NULL;
    if (rc == 0 && fbp != NULL)
        rc = srl__fallback_name_check(shm_name);   /* before anything is made */
    if (rc != 0)
        return rc;
    struct tiered *t = calloc(1, sizeof *t);
    if (t == NULL)
        return SRL_ENOMEM;
    srl_config headcfg = *use;
    if (headcfg.ticker.now == NULL)
        headcfg.ticker.now = srl_monotonic_ns;   /* T is exact, not a coarse tick late */
    (void)srl__limiter_init(&t->lim, &tiered_ops, &headcfg);   /* normalised: cannot fail */
    t->lim.impl = t;
    srl_config h;
    rc = srl_open_redis(uri, use, &t->redis);
    srl_info ri;
    if (rc == 0)
        rc = srl_info_get(t->redis, &ri);
    if (rc == 0) {
        t->plen = strnlen(ri.name, SRL__REDIS_PREFIX_MAX);
        memcpy(t->prefix, ri.name, t->plen);
        t->prefix[t->plen++] = ':';
        rc = host_config(use, t->lim.ticker, &h);
    }
    if (rc == 0) {
        rc = srl_open_shared(shm_name, &h, flags, &t->host);
        if (rc == SRL_EMISMATCH && use->key_display == 0) {
            /* A host segment made without a display copy (before the
             * default): adopted as it is, since a display never changes live. */
            h.key_display = 0;
            rc = srl_open_shared(shm_name, &h, flags, &t->host);
        }
        if (rc != 0)
            host_detail(shm_name, rc);
    }
    if (rc == 0)
        rc = host_is_ours(t->host, &h);
    if (rc == 0 && fbp != NULL)
        rc = srl__fallback_open(shm_name, use, fbp, h.key_display, t->lim.ticker, flags, &t->fb);
    if (rc != 0) {
        srl_close(t->redis);
        srl_close(t->host);
        srl_close(t->fb);
        free(t);
        return rc;
    }
    *out = &t->lim;
    return 0;
}

