/*
 * cost.h - the sentence of a request refused for its cost (cost.c;
 * internal).
 */
#ifndef SRL_COST_H
#define SRL_COST_H

#include <stdint.h>

#include "compound.h"

/* SRL_ECOST, with srl_last_error naming cost and what c takes
 * at most (cost 0: that a request costs 1 or more).  Refusals only. */
int srl__cost_refused(const struct srl__compound *c, uint32_t cost);

#endif
