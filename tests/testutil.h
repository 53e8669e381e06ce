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
#include <sys/types.h>
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

/* fork() for a test: the child's pid in the parent, 0 in the child.  A
 * failed fork fails the test, in the parent (the only process there is).
 *
 * The rule it keeps: a forked child never calls Check (no ck_assert, no
 * mark_point), not even the usual ck_assert_int_ge(pid, 0) after fork().
 * In fork mode Check carries every assertion to the runner as a message
 * appended to one file that all processes forked from the test share; a
 * child SIGKILLed inside that write leaves half a message there, and the
 * runner then fails the whole suite ("check_pack.c:156: Bad message type")
 * after every assertion passed.  That is how check_shm_chaos failed once
 * in CI.  A child reports through a shared_zeroed() page or its exit
 * status; the lint test forks_only_through_test_fork keeps fork() out of
 * the suites. */
pid_t test_fork(void);
/* test_fork for a setup that has already started something: a failed fork
 * first calls undo(arg) (stop what was started, remove what was made),
 * then fails the test as test_fork does. */
pid_t test_fork_undo(void (*undo)(void *), void *arg);

/* "/srl-test-<pid>-<counter>-<tag>": unique per process and call. */
const char *unique_name(const char *tag);

/* The state letter of a /proc/.../stat file ('R', 'S', 'Z'...: the field
 * after the command's closing parenthesis), or '?' if it cannot be read
 * (the process or thread is gone). */
char proc_stat_state(const char *stat_path);

/* d.remaining after one more admission of key (asserted admitted): by its
 * limits l (srl_acquire_limits), or srl_acquire when l is NULL. */
uint32_t left_after_one(srl_limiter *lim, const char *key, const srl_limits *l);

#endif
