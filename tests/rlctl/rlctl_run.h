/*
 * rlctl_run.h - running the built rlctl binary and worker processes from
 * the Check suite, with their output captured.
 *
 * The binaries come from the environment (set by tests/rlctl/meson.build):
 *   RLCTL         the rlctl under test (or a deliberately broken variant)
 *   RLCTL_WORKER  rlctl_worker
 * Output goes to anonymous temporary files, read back after the process
 * exits, so a chatty child can never block on a full pipe.
 */
#ifndef RLCTL_RUN_H
#define RLCTL_RUN_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct run_result {
    int status;       /* exit status, or 128 + signal */
    char *out, *err;  /* NUL-terminated captured stdout / stderr */
    size_t out_len, err_len;
} run_result;

/* Run $RLCTL with the given arguments (NULL-terminated) and wait. */
int run_rlctl(run_result *r, ...) __attribute__((sentinel));
int run_rlctl_argv(run_result *r, const char *const *args);
void run_free(run_result *r);

/* A process started in the background. */
typedef struct child {
    pid_t pid;
    FILE *out, *err;
    int progress;     /* read end of a worker's progress pipe, or -1 */
} child;

/* Start $RLCTL_WORKER NAME until-stopped MIN_ROUNDS HEXKEY...: it runs
 * until child_stop(), writing one byte to its progress pipe per round. */
int worker_start(child *c, const char *name, const char *min_rounds, char *const *hexkeys,
                 size_t nkeys);
/* The rounds a worker finished since the last call (never blocks). */
unsigned child_progress(child *c);
/* SIGTERM: the worker finishes its round (and MIN_ROUNDS), reports, exits. */
void child_stop(child *c);
/* 1 if it has exited (then *r is filled), 0 if still running. */
int child_poll(child *c, run_result *r);
void child_wait(child *c, run_result *r);

/*
 * Segment names for one test case: a prefix from unique_name("rlctl")
 * made once per Check test case in the parent (unchecked fixture), so the
 * parent can unlink whatever a test left behind even if it failed.
 */
void seg_prefix_init(void);      /* unchecked setup */
void seg_prefix_cleanup(void);   /* unchecked teardown: unlink PREFIX-* */
const char *seg_name(char *buf, size_t len, const char *tag); /* PREFIX-tag */

/* 1 if every byte of s[0..n) is printable ASCII or '\n'. */
int printable_ascii(const char *s, size_t n);

#endif
