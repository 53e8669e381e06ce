/*
 * shm_lock.c - bucket locks: robust process-shared mutexes, bounded waits,
 * crash repair and the undo record.
 *
 * Mutexes are PTHREAD_PROCESS_SHARED | PTHREAD_MUTEX_ROBUST with
 * PTHREAD_PRIO_NONE: priority inheritance is never used (PI futexes cost a
 * syscall per contended handoff and their robust list interacts badly with
 * fork).  Waits are bounded by lim.lock_timeout_ms through
 * pthread_mutex_clocklock(CLOCK_MONOTONIC), so a step of the wall clock can
 * neither stretch nor cut a wait.
 *
 * Outcomes of taking a bucket lock:
 *   0                    locked
 *   EOWNERDEAD           the owner died inside its critical section: we own
 *                        the lock, repair the bucket (srl__shm_repair_bucket,
 *                        the ONE place that does it), mark it consistent, go on
 *   ETIMEDOUT            a live owner is stuck: count `timeouts` (atomic add,
 *                        we do not hold the lock), return SRL_ETIMEDOUT
 *   ENOTRECOVERABLE      someone unlocked without repairing: report, never spin
 *
 * Undo record: before changing a slot's state in place the holder copies it
 * to the bucket's undo area and then stores undo_slot = slot + 1 (release);
 * after the change it stores undo_slot = 0.  A holder that dies in between
 * leaves undo_slot set, and repair copies the old state back: the dead
 * request never got its answer, so it must not have consumed anything.
 */
#include "shm.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int srl__shm_mutex_init(pthread_mutex_t *mu)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0)
        return SRL_ESYS;
    int e = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (e == 0)
        e = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (e == 0)
        e = pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_NONE);
    if (e == 0)
        e = pthread_mutex_init(mu, &a);
    pthread_mutexattr_destroy(&a);
    if (e != 0) {
        errno = e;
        return SRL_ESYS;
    }
    return 0;
}

struct timespec srl__shm_deadline(const struct srl__shm *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ms = s->lim.lock_timeout_ms;
    ts.tv_sec += (time_t)(ms / 1000u);
    ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

void srl__shm_undo_begin(struct srl__shm *s, uint64_t b, unsigned slot)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    memcpy((unsigned char *)bk + s->undo_off, srl__shm_slot_state(s, b, slot), s->state_bytes);
    __atomic_store_n(&bk->undo_slot, (uint8_t)(slot + 1), __ATOMIC_RELEASE);
}

void srl__shm_undo_end(struct srl__shm *s, uint64_t b)
{
    __atomic_store_n(&srl__shm_bucket(s, b)->undo_slot, 0, __ATOMIC_RELEASE);
}

void srl__shm_repair_bucket(struct srl__shm *s, uint64_t b, uint64_t now)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    unsigned undo = __atomic_load_n(&bk->undo_slot, __ATOMIC_ACQUIRE);
    if (undo >= 1 && undo <= SRL__SHM_SLOTS && bk->tags[undo - 1] != 0)
        memcpy(srl__shm_slot_state(s, b, undo - 1), (unsigned char *)bk + s->undo_off,
               s->state_bytes);
    /* An out-of-range undo_slot is itself damage: drop it, then validate. */
    __atomic_store_n(&bk->undo_slot, 0, __ATOMIC_RELEASE);
    for (unsigned i = 0; i < SRL__SHM_SLOTS; i++) {
        if (__atomic_load_n(&bk->tags[i], __ATOMIC_RELAXED) == 0)
            continue;
        if (!srl__shm_slot_valid(s, b, i, now)) {
            srl__shm_slot_reset(s, b, i, now);
            SRL__SHM_COUNT(bk->reset_slots, 1);
        }
    }
    SRL__SHM_COUNT(bk->recovered, 1);
}

/* Common tail of lock and trylock for a nonzero pthread result. */
static int after_lock(struct srl__shm *s, uint64_t b, int e)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    switch (e) {
    case EOWNERDEAD:
        srl__shm_repair_bucket(s, b, srl__now(&s->lim));
        if (pthread_mutex_consistent(&bk->mu) != 0) {
            pthread_mutex_unlock(&bk->mu);
            return SRL_ENOTRECOVERABLE;
        }
        return 0;
    case ETIMEDOUT:
        __atomic_fetch_add(&bk->timeouts, 1, __ATOMIC_RELAXED);
        return SRL_ETIMEDOUT;
    case ENOTRECOVERABLE:
        return SRL_ENOTRECOVERABLE;
    default:
        errno = e;
        return SRL_ESYS;
    }
}

int srl__shm_lock(struct srl__shm *s, uint64_t b, const struct timespec *deadline)
{
    int e = pthread_mutex_clocklock(&srl__shm_bucket(s, b)->mu, CLOCK_MONOTONIC, deadline);
    return e == 0 ? 0 : after_lock(s, b, e);
}

int srl__shm_trylock(struct srl__shm *s, uint64_t b)
{
    int e = pthread_mutex_trylock(&srl__shm_bucket(s, b)->mu);
    if (e == 0)
        return 0;
    if (e == EBUSY)
        return 1;
    return after_lock(s, b, e);
}

void srl__shm_unlock(struct srl__shm *s, uint64_t b)
{
    pthread_mutex_unlock(&srl__shm_bucket(s, b)->mu);
}
