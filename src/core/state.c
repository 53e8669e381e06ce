/*
 * state.c - the public pure core: srl_state_* over the algorithm vtables.
 *
 * This file owns the argument checks the algorithms may assume (algo.h):
 * a valid policy (else SRL_EPOLICY), non-NULL pointers (else SRL_EINVAL),
 * 1 <= cost <= capacity (burst, else permits; else SRL_ECOST).  A failing call writes neither the
 * state nor the decision.  Then it dispatches to srl__algo_get().
 *
 * No locks: the caller owns the state's storage and serialises access to
 * it.  peek passes commit = 0, under which decide() never writes the state,
 * so casting away const there is sound.
 */
#include "algo.h"
#include <string.h>

/* The vtable for a valid p, else NULL with *rc set. */
static const struct srl__algo *checked(const srl_policy *p, int *rc)
{
    *rc = srl_policy_validate(p);
    return *rc == 0 ? srl__algo_get(p->algorithm) : NULL;
}

size_t srl_state_size(const srl_policy *p)
{
    int rc;
    const struct srl__algo *a = checked(p, &rc);
    return a ? srl__limit_size(p) : 0;
}

int srl_state_init(const srl_policy *p, void *state, uint64_t now)
{
    int rc;
    const struct srl__algo *a = checked(p, &rc);
    if (a == NULL)
        return rc;
    if (state == NULL)
        return SRL_EINVAL;
    srl__limit_init(p, state, now);
    return 0;
}

static int decide(const srl_policy *p, const void *state, uint64_t now, uint32_t cost,
                  int commit, srl_decision *d)
{
    int rc;
    const struct srl__algo *a = checked(p, &rc);
    if (a == NULL)
        return rc;
    if (state == NULL || d == NULL)
        return SRL_EINVAL;
    if (cost == 0 || cost > srl__capacity(p))
        return SRL_ECOST;
    srl__limit_decide(p, (void *)state, now, cost, commit, d);
    d->wait_ns = 0;
    d->reserved[0] = d->reserved[1] = 0;
    return 0;
}

int srl_state_acquire(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                      srl_decision *d)
{
    if (p != NULL && p->algorithm == SRL_CONCURRENCY && srl_policy_validate(p) == 0)
        return SRL_ENOTSUP;   /* a unit needs a holder: srl_enter */
    return decide(p, state, now, cost, 1, d);
}

int srl_state_peek(const srl_policy *p, const void *state, uint64_t now, uint32_t cost,
                   srl_decision *d)
{
    return decide(p, state, now, cost, 0, d);
}

/* A compound of one: srl__compound_reserve is the one implementation. */
int srl_state_reserve(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                      uint64_t max_wait_ns, srl_decision *d)
{
    int rc;
    if (checked(p, &rc) == NULL)
        return rc;
    srl_limits l;
    if (srl_limits_of(p, &l) != 0)
        return SRL_EPOLICY;
    return srl_limits_state_reserve(&l, state, now, cost, max_wait_ns, d);
}

int srl_state_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost)
{
    int rc;
    const struct srl__algo *a = checked(p, &rc);
    if (a == NULL)
        return rc;
    if (p->algorithm == SRL_CONCURRENCY)
        return SRL_ENOTSUP;   /* a unit is given back by srl_leave */
    if (state == NULL)
        return SRL_EINVAL;
    if (cost == 0 || cost > srl__capacity(p))
        return SRL_ECOST;
    srl__limit_refund(p, state, now, cost);
    return 0;
}

int srl_state_at_rest(const srl_policy *p, const void *state, uint64_t now)
{
    int rc;
    const struct srl__algo *a = checked(p, &rc);
    if (a == NULL)
        return rc;
    if (state == NULL)
        return SRL_EINVAL;
    return srl__limit_at_rest(p, state, now) ? 1 : 0;
}

/* 1 or 0; for an invalid policy or a NULL state, the negative error code
 * (never 1, so "!= 1 means reset" stays safe for callers). */
int srl_state_valid(const srl_policy *p, const void *state, uint64_t now)
{
    int rc;
    const struct srl__algo *a = checked(p, &rc);
    if (a == NULL)
        return rc;
    if (state == NULL)
        return SRL_EINVAL;
    return srl__limit_valid(p, state, now) ? 1 : 0;
}

int srl_holder_get(const srl_policy *p, const void *state, uint32_t i, srl_holder *out)
{
    if (p == NULL || state == NULL || out == NULL || p->algorithm != SRL_CONCURRENCY ||
        srl_policy_validate(p) != 0)
        return SRL_EINVAL;
    struct srl__proc who;
    uint64_t since;
    if (!srl__conc_holder(p, state, i, &who, &since))
        return 0;
    memset(out, 0, sizeof *out);
    out->pid = who.pid;
    out->start = who.start;
    out->pidns = who.pidns;
    out->since_ns = since;
    return 1;
}

int srl_holder_alive(const srl_holder *h)
{
    if (h == NULL)
        return SRL_EINVAL;
    struct srl__proc who = {.pid = h->pid, .start = h->start, .pidns = h->pidns};
    switch (srl__proc_state(&who)) {
    case SRL__PROC_DEAD:
        return 0;
    case SRL__PROC_ALIVE:
        return 1;
    default:
        return 2;
    }
}
