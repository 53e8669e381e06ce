/*
 * shm_testutil.h - segment helpers shared by the suites (shm_testutil.c).
 *
 * shm_poke*: write bytes at an offset of the segment named name (as given
 * to srl_open_shared), through its file, to damage it on purpose; fails
 * the test if the segment cannot be opened or written.
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

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void shm_poke(const char *name, size_t off, const void *bytes, size_t n);
void shm_poke32(const char *name, size_t off, uint32_t v);
void shm_poke64(const char *name, size_t off, uint64_t v);
void shm_sweep_leftovers(const char *const *tags, size_t ntags);

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
