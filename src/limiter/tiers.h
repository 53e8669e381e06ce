/*
 * tiers.h - the tier table's functions (tiers.c; internal).  The table
 * itself lives in the limiter head (limiter.h, struct srl_limiter), which
 * includes this file; srl__tier_cmp, the head's accessor, stays there.
 */
#ifndef SRL_TIERS_H
#define SRL_TIERS_H

#include <stdbool.h>
#include <stdint.h>

#include "compound.h"
#include "srl.h"

/* A config's tier table against the rules of srl.h (TIERS):
 * 0, SRL_EINVAL (count, NULL, a name) or SRL_EPOLICY (limits). */
int srl__tiers_check(const srl_config *cfg);
/* A stored table (untrusted): the rules, canonical limits, and every entry
 * from count on all zero.  base: tier 0's limits. */
bool srl__tiers_valid(const srl_limits *base, const srl_tier *t, uint32_t count);
/* Resolve cfg's (checked) table into lim's tier fields: 0 or SRL_EPOLICY. */
int srl__tiers_init(srl_limiter *lim, const srl_config *cfg);
/* The largest state of cfg's tiers, base_bytes being tier 0's. */
uint32_t srl__tiers_state_max(const srl_config *cfg, uint32_t base_bytes);
/* The largest cost some tier takes, and the largest state of any tier. */
uint32_t srl__tiers_cost_max(const srl_limiter *lim);
uint32_t srl__tiers_bytes_max(const srl_limiter *lim);
/* Convert one key's state old (tier from) into out (tier to, to->state_bytes)
 * at now, by the rule of srl.h (TIERS).  out must not overlap old. */
void srl__tier_convert(const struct srl__compound *from, const void *old,
                       const struct srl__compound *to, void *out, uint64_t now);

#endif
