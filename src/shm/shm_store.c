/*
 * shm_store.c - the srl__store_ops of SRL_STORE_SHARED and
 * SRL_STORE_ANONYMOUS, and the public openers srl_open_shared,
 * srl_open_anonymous, srl_unlink.
 *
 * The table work lives in shm_table.c, shm_slot.c and shm_walk.c, the
 * check in shm_check.c, the segment's life in shm_segment.c.  This file
 * is the top of the store: it calls all of them and none of them calls it
 * (the segment openers take the ops as an argument; srl__shm_open here
 * passes srl__shm_ops).
 * this file adds what is read without a bucket lock: stats (per-bucket
 * counters summed with relaxed loads, so no cache line is shared by every
 * request) and info (the header, immutable once READY).
 */
#include "shm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int shm_stats(srl_limiter *lim, srl_stats *out)
{
    struct srl__shm *s = lim->impl;
    srl_stats st = {0};
    srl__shm_flood_flush();   /* the process's cached denials first (srl.h) */
    st.capacity = s->buckets * SRL__SHM_SLOTS;
    for (uint64_t b = 0; b < s->buckets; b++) {
        const struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
            st.used += __atomic_load_n(&bk->tags[i], __ATOMIC_RELAXED) != 0;
        st.allowed += __atomic_load_n(&bk->allowed, __ATOMIC_RELAXED);
        st.denied += __atomic_load_n(&bk->denied, __ATOMIC_RELAXED);
        st.full += __atomic_load_n(&bk->full, __ATOMIC_RELAXED);
        st.would_deny += __atomic_load_n(&bk->would_deny, __ATOMIC_RELAXED);
        st.reset_slots += __atomic_load_n(&bk->reset_slots, __ATOMIC_RELAXED);
        st.evicted += __atomic_load_n(&bk->evicted, __ATOMIC_RELAXED);
        st.timeouts += __atomic_load_n(&bk->timeouts, __ATOMIC_RELAXED);
    }
    st.reclaimed = __atomic_load_n(&srl__shm_live(s)->reclaimed, __ATOMIC_RELAXED);
    st.recovered = __atomic_load_n(&srl__shm_live(s)->recovered, __ATOMIC_RELAXED);
    st.exempt = __atomic_load_n(&srl__shm_live(s)->exempt, __ATOMIC_RELAXED);
    st.evicted_active = __atomic_load_n(&srl__shm_live(s)->evicted_active, __ATOMIC_RELAXED);
    *out = st;
    return 0;
}

/* The per-key counts of the process's cached denials first (srl.h). */
static int64_t shm_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx)
{
    srl__shm_flood_flush();
    return srl__shm_foreach(lim, fn, ctx);
}

/* A key freed here may be re-created before a cache of this process flushed
 * its pending denials of the old one; flushed first, they go to the key
 * they were denials of (srl.h: other processes' may not). */
static int shm_reset_key(srl_limiter *lim, const void *key, size_t len)
{
    srl__shm_flood_flush();
    return srl__shm_reset_key(lim, key, len);
}

static int64_t shm_evict_idle(srl_limiter *lim)
{
    srl__shm_flood_flush();
    return srl__shm_evict_idle(lim);
}

static int shm_info(srl_limiter *lim, srl_info *out)
{
    struct srl__shm *s = lim->impl;
    const struct srl__shm_header *h = srl__shm_hdr(s);
    memset(out, 0, sizeof *out);
    out->kind = s->kind;
    /* The policy now (the current copy), not the one at open. */
    const struct srl__shm_pol *p = srl__shm_pol_get(s, false);
    if (p == NULL)
        return SRL_ECORRUPT;
    out->policy = p->def[0].limits.limit[0];
    out->limits = p->def[0].limits;
    out->policy_gen = p->gen;
    out->state_bytes = s->state_bytes;
    out->layout_version = h->version;
    out->tier_count = lim->tier_count;
    out->on_full = lim->on_full;
    out->capacity = s->buckets * SRL__SHM_SLOTS;
    out->key_display = s->key_display;
    out->slots_per_bucket = SRL__SHM_SLOTS;
    out->buckets = s->buckets;
    out->segment_bytes = s->map_bytes;
    out->slot_bytes = s->slot_bytes;
    out->mode = s->mode;
    out->owner_uid = s->owner_uid;
    out->creator_pid = h->creator_pid;
    out->created_unix_ns = h->created_unix_ns;
    memcpy(out->name, s->name, sizeof out->name);
    out->name[sizeof out->name - 1] = '\0';
    out->file_bytes = srl__shm_file_bytes(s);
    /* Lock-free unless its first decision's pass failed (shm_table.c). */
    bool lf = s->lockfree &&
              __atomic_load_n(&s->lf_pending, __ATOMIC_RELAXED) != SRL__SHM_LF_FAILED;
    out->flags = (lf ? SRL_CONFIG_LOCKFREE : 0u) |
                 (s->flood != NULL ? SRL_CONFIG_FLOOD_CACHE : 0u);
    return 0;
}

static int shm_policy_change(srl_limiter *lim, const srl_config *cfg, uint32_t tier,
                             const srl_limits *one, int check, char *msg, size_t len)
{
    return srl__shm_policy_change(lim->impl, cfg, tier, one, check, msg, len);
}

static void shm_close(srl_limiter *lim)
{
    srl__shm_flood_close(lim->impl);
    srl__shm_unmap(lim->impl);
}

const struct srl__store_ops srl__shm_ops = {
    .acquire = srl__shm_flood_acquire,
    .acquire_tier = srl__shm_flood_acquire_tier,
    .peek = srl__shm_peek,
    .peek_tier = srl__shm_peek_tier,
    .refund = srl__shm_refund,
    .reserve = srl__shm_reserve,
    .reset_key = shm_reset_key,
    .evict_idle = shm_evict_idle,
    .stats = shm_stats,
    .info = shm_info,
    .foreach = shm_foreach,
    .check = srl__shm_check,
    .policy_change = shm_policy_change,
    .enter = srl__shm_enter,
    .leave = srl__shm_leave,
    .key_state = srl__shm_key_state,
    .key_control = srl__shm_key_control,
    .key_limits = srl__shm_key_limits,
    .acquire_limits = srl__shm_acquire_limits,
    .close = shm_close,
};


/* SRL_CHANGE: the segment was opened (what cannot change equal to cfg's)
 * and its current policy differs from cfg's: change it now, before anyone
 * has the handle.  Kept here, above both the segment openers and the
 * changer (shm_change.c uses shm_segment.c's geometry).  Then the handle's
 * flood cache (shm_flood.c); on failure the handle is closed. */
static int open_change(int rc, const srl_config *cfg, srl_limiter **out)
{
    if (rc != 0)
        return rc;
    if (((struct srl__shm *)(*out)->impl)->change_pending)
        rc = srl_policy_change(*out, cfg, NULL, 0);
    if (rc >= 0)   /* 1: changed; 0: another opener changed it first */
        rc = srl__shm_flood_open((*out)->impl, cfg);
    if (rc >= 0)
        srl__shm_lf_open((*out)->impl, cfg);
    if (rc != 0) {
        srl_close(*out);
        *out = NULL;
    }
    return rc;
}

int srl__shm_open(const char *name, const srl_config *cfg, unsigned flags, srl_limiter **out)
{
    return open_change(srl__shm_segment_open(name, cfg, flags, &srl__shm_ops, out), cfg, out);
}


int srl__shm_open_anonymous(const srl_config *cfg, srl_limiter **out)
{
    return open_change(srl__shm_segment_open_anonymous(cfg, &srl__shm_ops, out), cfg, out);
}

int srl_open_shared(const char *name, const srl_config *cfg, unsigned flags, srl_limiter **out)
{
    return srl__shm_open(name, cfg, flags, out);
}

int srl_open_anonymous(const srl_config *cfg, srl_limiter **out)
{
    return srl__shm_open_anonymous(cfg, out);
}

int srl_unlink(const char *name)
{
    char path[256];
    int rc = srl__shm_name(name, path);
    if (rc != 0)
        return rc;
    if (shm_unlink(path) == 0)
        return 0;
    switch (errno) {
    case ENOENT: return SRL_ENOENT;
    case EACCES: case EPERM: return SRL_EACCES;
    default: return SRL_ESYS;
    }
}
