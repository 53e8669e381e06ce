/*
 * rlctl_assert.h - Check assertions over rlctl runs, shared by the rlctl
 * suites: run and expect an exit status, parse --json output strictly,
 * create/destroy segments through rlctl, look keys up in a listing.
 * Every helper fails the current test (ck_assert) rather than return an
 * error.
 */
#ifndef RLCTL_ASSERT_H
#define RLCTL_ASSERT_H

#include <check.h>

#include "json_mini.h"
#include "rlctl_run.h"

/* Run rlctl with the arguments and require exit status `want`. */
#define RUN(r, want, ...)                                                              \
    do {                                                                               \
        int st_ = run_rlctl((r), __VA_ARGS__, (const char *)NULL);                     \
        ck_assert_msg(st_ == (want), "rlctl %s: exit %d (want %d)\nstdout: %s\nstderr: %s", \
                      #__VA_ARGS__, st_, (want), (r)->out, (r)->err);                  \
    } while (0)

/* stdout as JSON: must parse, be ASCII only, and be one line. */
json_value *parse_out(const run_result *r);
/* rlctl create NAME --policy P --capacity C --key-display D, exit 0. */
void seg_create(const char *name, const char *policy, const char *capacity, const char *display);
/* rlctl destroy NAME, exit 0. */
void seg_destroy(const char *name);
/* 1 if /dev/shm holds name. */
int shm_exists(const char *name);
/* The entry of `list --json` whose decoded "key" is key (at most one), or NULL. */
const json_value *find_key(const json_value *list, const char *key);
/* Run the suite in fork mode; the process's exit status. */
int run_suite(Suite *s);

#endif
