/*
 * clock.h - the clock reads behind the tickers (clock.c; internal).  A
 * limiter's own ticker is read through srl__now (limiter.h).
 */
#ifndef SRL_CLOCK_H
#define SRL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clock_gettime(id) in nanoseconds. */
uint64_t srl__clock_ns(clockid_t id);

#endif
