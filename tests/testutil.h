/*
 * testutil.h - helpers shared by the Check suites.
 *
 * Fake tickers (in-process and in a shared page for forked workers) and
 * unique segment names, so suites never collide with each other or with a
 * running system.
 */
#ifndef SRL_TESTUTIL_H
#define SRL_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include "srl.h"

#define MS 1000000ull
#define SEC 1000000000ull

/* A fake clock set by hand.  Lives in an anonymous MAP_SHARED page when made
 * by fake_clock_shared(), so every forked worker sees the same time. */
typedef struct fake_clock {
    volatile uint64_t now;
} fake_clock;

uint64_t fake_clock_read(void *ctx);           /* srl_ticker_fn */
fake_clock *fake_clock_shared(uint64_t start); /* munmap'd at exit */
srl_ticker fake_ticker(fake_clock *c);

/* n zeroed bytes in an anonymous MAP_SHARED mapping: what a test's forked
 * workers and its parent all see (counts, start lines, stop flags).  Aborts
 * if the mapping fails; munmap(p, n) when done, or leave it to exit. */
void *shared_zeroed(size_t n);

/* "/srl-test-<pid>-<counter>-<tag>": unique per process and call. */
const char *unique_name(const char *tag);

/* The state letter of a /proc/.../stat file ('R', 'S', 'Z'...: the field
 * after the command's closing parenthesis), or '?' if it cannot be read
 * (the process or thread is gone). */
char proc_stat_state(const char *stat_path);

#endif
