/*
 * store_testutil.h - one segment store under test, shared (named) or
 * anonymous, for suites that run each test on both (a loop test's _i) with
 * forked workers: the creator opens it, each worker gets its handle (the
 * anonymous one is inherited; a named one is opened by name, or the worker
 * exits 1), the parent reaps the workers and closes (and unlinks) it.
 * Header-only: static functions, so a suite needs no meson change.
 */
#ifndef SRL_STORE_TESTUTIL_H
#define SRL_STORE_TESTUTIL_H

#include <check.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srl.h"
#include "testutil.h"

struct store {
    int named;
    const char *name;
    srl_limiter *lim;
};

static inline void store_open(struct store *st, int named, const char *tag, const srl_config *cfg)
{
    st->named = named;
    st->name = named ? unique_name(tag) : NULL;
    if (named)
        ck_assert_int_eq(srl_open_shared(st->name, cfg, SRL_CREATE, &st->lim), 0);
    else
        ck_assert_int_eq(srl_open_anonymous(cfg, &st->lim), 0);
}

/* In a worker: its handle on the store. */
static inline srl_limiter *store_worker(const struct store *st, const srl_config *cfg)
{
    if (!st->named)
        return st->lim;
    srl_limiter *lim;
    if (srl_open_shared(st->name, cfg, SRL_ADOPT, &lim) != 0)
        _exit(1);
    return lim;
}

static inline void store_close(struct store *st)
{
    srl_close(st->lim);
    if (st->named)
        ck_assert_int_eq(srl_unlink(st->name), 0);
}

/* Wait for n workers; each must have exited 0. */
static inline void store_reap(const pid_t *pids, int n)
{
    for (int w = 0; w < n; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %d: status %d", w,
                      status);
    }
}

#endif
