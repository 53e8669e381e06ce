/*
 * decide.h - one request's answer: the quotas of a config applied to the
 * request's attributes.
 */
#ifndef SRL_POLICYD_DECIDE_H
#define SRL_POLICYD_DECIDE_H

#include <stddef.h>

#include "conf.h"
#include "proto.h"

/* What the answer was, for the log and the tests. */
enum pd_outcome {
    PD_PASS = 0,      /* every quota allowed (or did not apply): DUNNO */
    PD_DEFER,         /* a quota denied: defer_action 4.7.1 ... retry in N s */
    PD_TOO_BIG,       /* the cost is over a quota's permits: REJECT 5.7.1 */
    PD_MISSING,       /* a key attribute absent or empty: missing_action */
    PD_BAD_REQUEST,   /* not an smtpd_access_policy request, or a bad cost: default_action */
    PD_ERROR          /* srl failed: error_action */
};

/* Decide the request r holds under c (whose quotas are open).  action gets
 * the text after "action=", why a sentence for the log (empty for a plain
 * pass).  Quotas are taken in order; a denial gives back what the quotas
 * before it took, so a deferred message costs nothing. */
int pd_decide(pd_conf *c, const pd_reader *r, char *action, size_t alen, char *why,
              size_t wlen);

/* The cost of r under q: a fixed cost, or q's cost attribute as a decimal
 * (absent, empty or 0: 1, a request at RCPT counts one recipient).
 * Returns 0, or -1 for a value that is not a number 0..UINT32_MAX. */
int pd_cost(const pd_quota *q, const pd_reader *r, uint32_t *cost);

#endif
