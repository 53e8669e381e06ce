/*
 * shm_change.c - srl_policy_change on a shared segment: a new policy for
 * every process that has it mapped, without a restart, each key keeping
 * its use (docs/design.md, "Live policy changes (layout 6)").
 *
 * The changer, at generation g (policy_gen):
 *   1. checks what can never change (capacity, key_display, the tier
 *      names and count, a concurrency limit) and that the new policy's
 *      largest state fits the slots (state_bytes): else SRL_EMISMATCH or
 *      SRL_EPOLICY with what to do in msg, and nothing is touched;
 *   2. takes flock(LOCK_EX) on the segment file, through a description of
 *      its own (/proc/self/fd/N): changers run one at a time
 *      (an anonymous segment has no file: SRL_ENOTSUP);
 *   3. sweeps every bucket under its lock, converting each slot still on
 *      g - 1 to g (srl__shm_slot_current, the rule of tiers.c), so that no
 *      state is more than one generation behind when (4) overwrites g - 1's
 *      copy;
 *   4. writes generation g + 1 into the spare copy ((g + 1) & 1), sealed;
 *   5. publishes policy_gen = g + 1 (release).
 * From (5) on, every decision (which loads policy_gen under its bucket
 * lock) uses g + 1 and converts a key of g on its next touch.
 *
 * Crashes: a changer killed before (5) changed no policy: the spare copy
 * is not named by policy_gen, and the slots it converted in (3) are on g,
 * the current generation, as every decision would have left them.  One
 * killed after (5) is done.  A kill holding a bucket lock is repaired by
 * that bucket's next locker (EOWNERDEAD, shm_table.c), and the flock goes
 * with the process.  Nothing here is ever half-published: policy_gen is
 * one aligned word.
 *
 * Locks: the file's flock, then one bucket lock at a time (lock order of
 * shm.h is kept; no bucket lock is held while waiting for the flock).
 */
#include "shm.h"
#include "msg.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>


#define DIE_POINT(s) ((void)0)
#define PARK_POINT(s, msg, len) 0

static bool has_conc(const srl_limits *l)
{
    for (uint32_t i = 0; i < l->count && i < SRL_LIMITS_MAX; i++)
        if (l->limit[i].algorithm == SRL_CONCURRENCY)
            return true;
    return false;
}

/* The new table, canonical and NUL-padded as a copy holds it. */
struct table {
    srl_limits limits;
    srl_tier tiers[SRL_TIERS_MAX - 1];
    uint32_t count;   /* tier 0 included */
};

static int table_of(const srl_config *cfg, struct table *t)
{
    memset(t, 0, sizeof *t);
    if (srl__tiers_check(cfg) != 0 || srl__limits_canonical(&cfg->limits, &t->limits) != 0)
        return SRL_EPOLICY;
    t->count = cfg->tier_count + 1;
    for (uint32_t i = 0; i < cfg->tier_count; i++) {
        memcpy(t->tiers[i].name, cfg->tiers[i].name, strlen(cfg->tiers[i].name));
        if (srl__limits_canonical(&cfg->tiers[i].limits, &t->tiers[i].limits) != 0)
            return SRL_EPOLICY;
    }
    return 0;
}

static uint32_t table_state_max(const struct table *t, const srl_limits **largest)
{
    size_t m = srl_limits_state_size(&t->limits);
    *largest = &t->limits;
    for (uint32_t i = 1; i < t->count; i++) {
        size_t n = srl_limits_state_size(&t->tiers[i - 1].limits);
        if (n > m) {
            m = n;
            *largest = &t->tiers[i - 1].limits;
        }
    }
    return (uint32_t)m;
}

/* What can never change, and the size: 0 or an error with msg. */
static int refuse(const struct srl__shm *s, const srl_config *cfg, const struct table *t,
                  const struct srl__shm_pol *cur, char *msg, size_t len)
{
    struct srl__shm g;
    memset(&g, 0, sizeof g);
    if (srl__shm_geometry(&g, cfg) != 0)
        return srl__say(msg, len, SRL_EPOLICY, "policy: not valid");
    if (g.buckets != s->buckets)
        return srl__say(msg, len, SRL_EMISMATCH,
                   "capacity: the segment holds %llu slots, this config asks for %llu keys "
                   "(%llu slots): capacity cannot change live; ask for %llu, or make a new "
                   "segment (rlctl create)",
                   (unsigned long long)(s->buckets * SRL__SHM_SLOTS),
                   (unsigned long long)cfg->capacity,
                   (unsigned long long)(g.buckets * SRL__SHM_SLOTS),
                   (unsigned long long)(s->buckets * SRL__SHM_SLOTS));
    if (cfg->key_display != s->key_display)
        return srl__say(msg, len, SRL_EMISMATCH,
                   "key_display: the segment keeps %u bytes per key, this config asks for %u: "
                   "it is part of the slot size and cannot change live; use %u",
                   s->key_display, cfg->key_display, s->key_display);
    if (t->count != cur->tier_count)
        return srl__say(msg, len, SRL_EMISMATCH,
                   "tiers: the segment has %u, this config asks for %u: tiers cannot be added "
                   "or removed live (their indices are in use); change a tier's policy instead",
                   cur->tier_count, t->count);
    for (uint32_t i = 1; i < t->count; i++)
        if (memcmp(t->tiers[i - 1].name, cur->def[i].name, sizeof cur->def[i].name) != 0)
            return srl__say(msg, len, SRL_EMISMATCH,
                       "tiers: tier %u is '%s' in the segment, this config names it '%s': tiers "
                       "cannot be renamed live",
                       i, cur->def[i].name, t->tiers[i - 1].name);
    if (has_conc(&s->created) || has_conc(&t->limits))
        return srl__say(msg, len, SRL_EPOLICY,
                   "policy: a concurrency limit cannot change live (its units name their "
                   "holders); make a new segment (rlctl create)");
    const srl_limits *largest;
    uint32_t need = table_state_max(t, &largest);
    if (need > s->state_bytes) {
        char want[SRL_LIMITS_TEXT_MAX], have[SRL_LIMITS_TEXT_MAX];
        srl_limits_format(largest, want, sizeof want);
        srl_limits_format(&s->created, have, sizeof have);
        return srl__say(msg, len, SRL_EMISMATCH,
                   "size: the segment's slots hold %u bytes of state (made for %s), %s needs "
                   "%u: make a bigger segment under another name, e.g. rlctl create NEWNAME "
                   "--policy '%s' --capacity %llu%s, move the workers to it and destroy this one",
                   s->state_bytes, have, want, need, want,
                   (unsigned long long)(s->buckets * SRL__SHM_SLOTS),
                   s->key_display > 0 ? " --key-display N" : "");
    }
    return 0;
}

static bool table_equal(const struct table *t, const struct srl__shm_pol *p)
{
    if (memcmp(&t->limits, &p->def[0].limits, sizeof t->limits) != 0)
        return false;
    for (uint32_t i = 1; i < t->count; i++)
        if (memcmp(&t->tiers[i - 1].limits, &p->def[i].limits, sizeof t->limits) != 0)
            return false;
    return true;
}

/* Step 3: no slot left on cur->gen - 1. */
static int sweep(struct srl__shm *s, const struct srl__shm_pol *cur, char *msg, size_t len)
{
    for (uint64_t b = 0; b < s->buckets; b++) {
        struct timespec deadline = SRL__SHM_NO_DEADLINE;
        int rc = srl__shm_lock(s, b, &deadline);
        if (rc != 0)
            return srl__say(msg, len, rc,
                       "bucket %llu: lock not available (%s): nothing was changed; run the "
                       "change again", (unsigned long long)b, srl_strerror(rc));
        struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
        uint64_t now = srl__now(&s->lim);
        for (unsigned i = 0; i < SRL__SHM_SLOTS; i++)
            if (bk->tags[i] != 0) {
                srl__shm_slot_current(s, cur, b, i, now);
                srl__shm_slot_thaw(s, b, i);
            }
        DIE_POINT(s);
        srl__shm_unlock(s, b);
    }
    return 0;
}

/* srl_policy_change_tier's table: the current one with tier `tier` set to
 * one, read under the flock (so two changers of two tiers both count),
 * and the segment's own shape for cfg. */
static int table_one(const struct srl__shm *s, const struct srl__shm_pol *cur, uint32_t tier,
                     const srl_limits *one, struct table *t, srl_config *cfg, char *msg,
                     size_t len)
{
    if (tier >= cur->tier_count)
        return srl__say(msg, len, SRL_EINVAL, "tier %u: the segment has tiers 0..%u", tier,
                   cur->tier_count - 1);
    srl_config_init(cfg);
    cfg->capacity = s->buckets * SRL__SHM_SLOTS;
    cfg->key_display = s->key_display;
    cfg->limits = cur->def[0].limits;
    cfg->tiers = cur->def + 1;
    cfg->tier_count = cur->tier_count - 1;
    srl_tier changed[SRL_TIERS_MAX - 1];
    if (tier == 0) {
        cfg->limits = *one;
    } else {
        memcpy(changed, cur->def + 1, sizeof changed);
        changed[tier - 1].limits = *one;
        cfg->tiers = changed;
    }
    cfg->policy = cfg->limits.limit[0];
    int rc = table_of(cfg, t);
    cfg->tiers = NULL;   /* the table is in t now; changed is this frame's */
    cfg->tier_count = 0;
    return rc != 0 ? srl__say(msg, len, rc, "policy: not valid for tier %u", tier) : 0;
}

/* Steps 2-5 under the flock.  one != NULL: srl_policy_change_tier. */
static int change_locked(struct srl__shm *s, const srl_config *cfg, struct table *t,
                         uint32_t tier, const srl_limits *one, int check, char *msg, size_t len)
{
    uint32_t *genp = &srl__shm_live(s)->policy_gen;
    uint32_t gen = __atomic_load_n(genp, __ATOMIC_ACQUIRE);
    struct srl__shm_policy copy;
    int rc = srl__shm_policy_read(s, gen, &copy, msg, len);
    if (rc != 0)
        return rc;
    const struct srl__shm_pol *cur = srl__shm_pol_of(s, gen);
    if (cur == NULL)   /* the copy was read above: memory, or a generation gone back */
        return srl__say(msg, len, SRL_ECORRUPT,
                        "policy generation %u: behind the one this handle has seen, or out "
                        "of memory: nothing was changed; run srl_check (rlctl check)", gen);
    srl_config own;
    if (one != NULL) {
        rc = table_one(s, cur, tier, one, t, &own, msg, len);
        if (rc != 0)
            return rc;
        cfg = &own;
    }
    rc = refuse(s, cfg, t, cur, msg, len);
    if (rc != 0 || check || table_equal(t, cur))
        return rc;   /* the same policy: nothing to do, no new generation */
    rc = PARK_POINT(s, msg, len);
    if (rc != 0)
        return rc;
    rc = sweep(s, cur, msg, len);
    if (rc != 0)
        return rc;
    DIE_POINT(s);
    srl__shm_policy_fill(&copy, gen + 1u, &t->limits, t->tiers, t->count);
    unsigned char *spare = s->base + SRL__SHM_POLICY_OFFSET((gen + 1u) & 1u);
    /* Nobody reads the spare copy as generation gen + 1 before (5); a
     * reader of gen - 1 (only for a slot on it: there are none left) gets a
     * torn copy that fails its sum. */
    memcpy(spare, &copy, sizeof copy / 2);
    DIE_POINT(s);
    memcpy(spare + sizeof copy / 2, (unsigned char *)&copy + sizeof copy / 2,
           sizeof copy - sizeof copy / 2);
    DIE_POINT(s);
    __atomic_store_n(genp, gen + 1u, __ATOMIC_RELEASE);
    DIE_POINT(s);
    return 1;    /* this call made the new generation (srl.h: callers tell it
                    from "it was the current policy already", which is 0) */
}

int srl__shm_policy_change(struct srl__shm *s, const srl_config *cfg, uint32_t tier,
                           const srl_limits *one, int check, char *msg, size_t len)
{
    if (msg != NULL && len > 0)
        msg[0] = '\0';
    if (s->kind != SRL_STORE_SHARED || s->fd < 0)
        return srl__say(msg, len, SRL_ENOTSUP,
                   "an anonymous segment's policy cannot change (no file to serialise "
                   "changers); create a new one");
    struct table t;
    int rc = one != NULL ? 0 : table_of(cfg, &t);
    if (rc != 0)
        return srl__say(msg, len, rc, "policy: not a valid table (srl_config's rules)");
    /* The changers' flock is taken on an open file description of this
     * call's own, not on s->fd: a handle opened before fork (a pre-forked
     * server's parent) shares s->fd's description with every child, and
     * flock treats all holders of one description as one owner, so two
     * children would both "hold" it and both publish (e2e-apache-prefork
     * saw two children each make generation 1).  /proc/self/fd/N opens the
     * same inode anew, even if its name was unlinked or reused since. */
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", s->fd);
    pthread_mutex_lock(&s->change_mu);
    int lfd = open(path, O_RDONLY | O_CLOEXEC);
    if (lfd < 0) {
        pthread_mutex_unlock(&s->change_mu);
        return srl__say(msg, len, SRL_ESYS, "cannot open %s to lock the segment for a change "
                        "(a policy change needs /proc mounted)", path);
    }
    int held = lfd;
    if (flock(held, LOCK_EX) != 0) {
        close(lfd);
        pthread_mutex_unlock(&s->change_mu);
        return srl__say(msg, len, SRL_ESYS, "flock on the segment file failed");
    }
    rc = change_locked(s, cfg, &t, tier, one, check, msg, len);
    if (held != lfd)
        (void)flock(held, LOCK_UN);
    close(lfd);   /* releases the flock */
    pthread_mutex_unlock(&s->change_mu);
    return rc;
}
