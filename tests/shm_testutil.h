/*
 * shm_testutil.h - cleanup shared by the check_shm_* suites.
 *
 * Check's fork mode ends a failing test with _exit, so a test that fails
 * between creating a segment and unlinking it leaves the segment behind.
 * Each suite's main() calls shm_sweep_leftovers() after the run: it unlinks
 * /dev/shm/srl-test-<pid>-<n>-<tag> for the suite's own tags whose <pid>
 * (the test process that created it, see unique_name) no longer exists, so
 * a concurrently running suite's segments are never touched.
 *
 * struct check_lines / check_lines_collect: an srl_report_fn that counts
 * srl_check's problem lines and keeps the last one.
 */
#ifndef SRL_SHM_TESTUTIL_H
#define SRL_SHM_TESTUTIL_H

#include <dirent.h>
#include <sched.h>
#include <stdint.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static inline void shm_sweep_leftovers(const char *const *tags, size_t ntags)
{
    DIR *dir = opendir("/dev/shm");
    if (dir == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        long pid;
        unsigned n;
        int used = 0;
        if (sscanf(e->d_name, "srl-test-%ld-%u-%n", &pid, &n, &used) != 2 || used == 0)
            continue;
        const char *tag = e->d_name + used;
        int mine = 0;
        for (size_t i = 0; i < ntags && !mine; i++)
            mine = strcmp(tag, tags[i]) == 0;
        if (!mine || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (shm_unlink(name) == 0)
            fprintf(stderr, "removed %s, left by a failed test\n", name);
    }
    closedir(dir);
}

struct check_lines {
    int n;
    char last[256];
};

static inline void check_lines_collect(void *ctx, const char *line)
{
    struct check_lines *l = ctx;
    l->n++;
    snprintf(l->last, sizeof l->last, "%s", line);
}

/*
 * A spinning barrier for n forked workers, kept in a MAP_SHARED page.
 * Spinning (yielding between polls) rather than a futex barrier: a futex
 * wakes its sleepers tens of microseconds apart, so released workers would
 * rarely overlap and a race test would prove nothing (see check_shm_race.c).
 */
struct spin_barrier {
    uint32_t arrived;               /* arrivals this generation */
    uint32_t generation;
};

static inline void spin_barrier_wait(struct spin_barrier *b, uint32_t n)
{
    uint32_t gen = __atomic_load_n(&b->generation, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->arrived, 1, __ATOMIC_ACQ_REL) == n) {
        __atomic_store_n(&b->arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->generation, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    for (unsigned spins = 0; __atomic_load_n(&b->generation, __ATOMIC_ACQUIRE) == gen; spins++)
        if (spins % 64 == 63)
            sched_yield();
}

#endif
