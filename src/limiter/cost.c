/*
 * cost.c - the sentence of a request refused for its cost (SRL_ECOST):
 * srl_last_error names the cost and what the limits take at most, as the
 * bindings and rlctl say it.  Only refusals reach here (no hot path); the
 * caller may hold a bucket lock: this formats into the calling thread's
 * detail buffer (errdetail.c) and touches nothing else.
 */
#include "cost.h"
#include "errdetail.h"
#include "limiter.h"

int srl__cost_refused(const struct srl__compound *c, uint32_t cost)
{
    if (cost == 0) {
        srl__err_set("cost 0: a request costs 1 or more");
        return SRL_ECOST;
    }
    char pol[SRL_LIMITS_TEXT_MAX];
    if (srl_limits_format(&c->limits, pol, sizeof pol) < 0)
        pol[0] = '\0';
    srl__err_set("cost %u: '%s' allows %u at most", cost, pol, c->min_permits);
    return SRL_ECOST;
}
