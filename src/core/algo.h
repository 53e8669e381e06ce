/*
 * algo.h - the algorithm table: one vtable per srl_algorithm (internal).
 *
 * Each algorithm is a pure state machine over a fixed-size, pointer-free
 * block of bytes.  Functions here take no lock, do no I/O and never read a
 * clock: time comes in as `now`.  Callers (state.c, the stores) have already
 * validated the policy and the cost (1 <= cost <= permits); the functions
 * assert that, they do not re-check it.
 *
 * Contract shared by every algorithm:
 *   - decide() fills *d; if commit is nonzero and the request is allowed it
 *     writes the new state, otherwise it never writes the state.
 *   - elapsed time that is negative counts as zero; a state's time fields
 *     never move backwards.
 *   - at_rest(): the state is indistinguishable from init(now).
 *   - valid(): every invariant holds (used by crash repair).
 *   - refund(): gives back cost permits at now, exactly (the state an
 *     admission of cost fewer would have left) and never past a fresh
 *     state; on a state at rest it writes nothing.
 *   - last_ns(): time of the last admitted request (for "rlctl list --sort
 *     recent"); 0 if none is known.
 *   - can_reserve() (NULL: never): decide() at a future instant t, with
 *     commit, is an exact reservation for t made at any now <= t: every
 *     later decision at now' in [now, t) sees the permits as taken, and a
 *     refund at now gives them back exactly (the state decides as before
 *     the reservation).  A reservation is then the wait of a dry decide()
 *     (its retry_after) followed by a committing decide() at now + wait:
 *     compound.c's srl__compound_reserve, the same for every algorithm.
 */
#ifndef SRL_ALGO_H
#define SRL_ALGO_H

#include <stdbool.h>
#include "srl.h"
#include "proc.h"

struct srl__algo {
    const char *name;
    size_t (*size)(const srl_policy *p);
    void (*init)(const srl_policy *p, void *state, uint64_t now);
    void (*decide)(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                   int commit, srl_decision *d);
    void (*refund)(const srl_policy *p, void *state, uint64_t now, uint32_t cost);
    bool (*at_rest)(const srl_policy *p, const void *state, uint64_t now);
    bool (*valid)(const srl_policy *p, const void *state, uint64_t now);
    uint64_t (*last_ns)(const srl_policy *p, const void *state);
    bool (*can_reserve)(const srl_policy *p);
};

/* What a fresh state of p holds: burst for token_bucket and gcra when set,
 * else permits.  The largest cost p can ever admit. */
static inline uint32_t srl__capacity(const srl_policy *p)
{
    return p->burst != 0 ? p->burst : p->permits;
}

/* The vtable for a, or NULL for an unknown value. */
const struct srl__algo *srl__algo_get(srl_algorithm a);

extern const struct srl__algo srl__algo_token_bucket;
extern const struct srl__algo srl__algo_sliding_log;
extern const struct srl__algo srl__algo_sliding_counter;
extern const struct srl__algo srl__algo_gcra;
extern const struct srl__algo srl__algo_concurrency;
extern const struct srl__algo srl__algo_fixed_window;

/* A fixed_window state of po at now as one of pn (tiers.c): the open
 * window keeps its start and its count (at most pn's permits) while
 * pn's window has not ended; out is otherwise fresh. */
void srl__fw_convert(const srl_policy *po, const void *old, const srl_policy *pn, void *out,
                     uint64_t now);

/* d made a ban's denial with left ns of the ban to go, whatever it said:
 * nothing remaining, retry and reset at least left (a ",penalty=" ban,
 * penalty.c; an operator's ban, the stores' control and walks). */
static inline void srl__decision_banned(srl_decision *d, uint64_t left)
{
    d->allowed = 0;
    d->remaining = 0;
    if (d->retry_after_ns < left)
        d->retry_after_ns = left;
    if (d->reset_after_ns < left)
        d->reset_after_ns = left;
}

/* One limit with its options (penalty.c): what compound.c and state.c call
 * for every limit, never the vtable directly.  Without a penalty each is
 * the vtable call; with one, the state gains a trailing u64 (the ban's end)
 * and a committed denial bans the key for penalty_ns.  srl__limit_ban
 * records a denial decided elsewhere (a compound's dry run). */
size_t srl__limit_size(const srl_policy *p);
void srl__limit_init(const srl_policy *p, void *state, uint64_t now);
void srl__limit_decide(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                       int commit, srl_decision *d);
void srl__limit_ban(const srl_policy *p, void *state, uint64_t now, srl_decision *d);
void srl__limit_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost);
bool srl__limit_at_rest(const srl_policy *p, const void *state, uint64_t now);
bool srl__limit_valid(const srl_policy *p, const void *state, uint64_t now);
uint64_t srl__limit_last_ns(const srl_policy *p, const void *state);
/* Reservations (srl_state_reserve): whether p's algorithm can wait, and
 * how long p's ban still runs at now (0: not banned, or no penalty). */
bool srl__limit_can_reserve(const srl_policy *p);
uint64_t srl__limit_banned_ns(const srl_policy *p, const void *state, uint64_t now);
/* Escalation (",penalty=MIN..MAX"): the bans remembered at now (0: none,
 * or no escalation; 1: the last ban was MIN long), and forgiving: no ban,
 * nothing remembered (srl_key_unban), the algorithm's state untouched. */
uint32_t srl__limit_offences(const srl_policy *p, const void *state, uint64_t now);
void srl__limit_forgive(const srl_policy *p, void *state);

/* Concurrency (algo_concurrency.c): holder-aware calls on a valid
 * SRL_CONCURRENCY state; callers hold the key's lock. */
typedef int (*srl__conc_alive_fn)(const struct srl__proc *who, void *ctx); /* 0: dead */
/* Admit one unit for who if fewer than permits are in flight (reclaiming
 * dead and max_hold-expired units first when full); on admission *entry and
 * *gen name the unit (gen != 0), else *gen = 0. */
void srl__conc_enter(const srl_policy *p, void *state, uint64_t now,
                     const struct srl__proc *who, srl__conc_alive_fn alive, void *ctx,
                     srl_decision *d, uint32_t *entry, uint32_t *gen);
/* Release unit (entry, gen): 0, or SRL_ENOENT if it is not held under gen. */
int srl__conc_leave(const srl_policy *p, void *state, uint32_t entry, uint32_t gen);
/* Free units whose holder is dead (alive() == 0) or past max_hold; returns how many. */
uint32_t srl__conc_reclaim(const srl_policy *p, void *state, uint64_t now,
                           srl__conc_alive_fn alive, void *ctx);
uint32_t srl__conc_inflight(const void *state);
/* Start a fresh state's generations at seq (a store's random value). */
void srl__conc_seed(void *state, uint32_t seq);
/* 1 and the holder of entry i if it is in use, else 0. */
int srl__conc_holder(const srl_policy *p, const void *state, uint32_t i,
                     struct srl__proc *who, uint64_t *since_ns);

/* Integer helpers shared by the algorithms (algo_common.c). */
typedef unsigned __int128 srl__u128;
uint64_t srl__sat_add(uint64_t a, uint64_t b);          /* a + b, saturating */
uint64_t srl__ceil_div128(srl__u128 n, uint64_t d);     /* ceil(n / d), saturating at UINT64_MAX */

/* n / d and n % d for a 128-bit n whose quotient fits 64 bits (n's high
 * half below d; callers check it), d > 0.  What every decision divides:
 * GCC turns a 128-by-64 division into a call of libgcc's __udivmodti4
 * (~60 instructions on the hot path; docs/design.md, "Three per-decision
 * costs that bought nothing"), although x86-64's
 * DIVQ divides a 128-bit dividend by a 64-bit divisor in one instruction
 * when the quotient fits, which n's high half below d guarantees (no #DE). */
static inline uint64_t srl__div128_64(srl__u128 n, uint64_t d, uint64_t *rem)
{
    uint64_t hi = (uint64_t)(n >> 64), lo = (uint64_t)n;
#if defined(__x86_64__)
    uint64_t q, r;
    __asm__("divq %4" : "=a"(q), "=d"(r) : "a"(lo), "d"(hi), "rm"(d) : "cc");
    *rem = r;
    return q;
#else
    if (hi == 0) {
        *rem = lo % d;
        return lo / d;
    }
    *rem = (uint64_t)(n % d);
    return (uint64_t)(n / d);
#endif
}

#endif
