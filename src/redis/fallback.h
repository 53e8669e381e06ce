/*
 * fallback.h - the fronted store's host fallback (fallback.c), internal:
 * while Redis does not answer, a shared segment of the fallback policy
 * decides on the host.
 */
#ifndef SRL_FALLBACK_H
#define SRL_FALLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "srl.h"

/* The fallback segment's name: the host segment's with this suffix. */
#define SRL__FALLBACK_SUFFIX ".fallback"

/* Open (flags as srl_open_shared) the fallback segment of the host segment
 * shm_name: policy pol, cfg's capacity, key_display (kd), mode, owner,
 * on_full and lock_timeout_ms, on ticker.  0 or srl_open_shared's error
 * (SRL_EINVAL: the name with its suffix is longer than SRL_NAME_MAX). */
int srl__fallback_open(const char *shm_name, const srl_config *cfg, const srl_limits *pol,
                       uint32_t kd, srl_ticker ticker, unsigned flags, srl_limiter **out);

/* 0 if shm_name leaves room for its fallback segment's name, else
 * SRL_EINVAL (srl_last_error says how long it may be). */
int srl__fallback_name_check(const char *shm_name);

/* 1 if a Redis call that returned rc did not reach an answer (the server
 * down, refusing connections, or silent past timeout_ms): the fallback
 * decides then.  A server that answers (a mismatch, NOAUTH, a reply no
 * script gives) is not an outage: on_full's answer stands. */
int srl__fallback_applies(int rc);

/* The fallback's decision of cost for the host key hk[0..hlen), flagged
 * SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL (count: acquire, else peek).
 * 0, or the segment's error with its on_full answer. */
int srl__fallback_decide(srl_limiter *fb, const void *hk, size_t hlen, uint32_t cost, int count,
                         srl_decision *d);

#endif
