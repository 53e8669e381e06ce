/*
 * shm_lock.c - bucket mutexes: robust process-shared mutex setup, the kind
 * check, bounded-wait deadlines and the undo record.  Taking a lock (and
 * the crash repair it may do) is in shm_table.c; the slot rules repair
 * applies are in shm_slot.c, which uses the undo record here.  This file
 * calls nothing of either, so no two of them call each other.  The rules
 * below hold for all three.
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
 *   (SRL_ECORRUPT)       the mutex's kind word is not the one srl__shm_mutex_init
 *                        writes: never handed to glibc (see below)
 *
 * Mutex kind: glibc takes a mutex's type (robust, PI, priority-protect,
 * pshared) from its __kind word, i.e. from the segment, on every lock and
 * unlock, and asserts on combinations it did not expect (robust+PI+shared
 * 0xb0: pthread_mutex_timedlock.c; priority-protect 0xc0: tpp.c), which
 * aborts the locker: every worker, and rlctl check.  So every lock and
 * trylock first compares that word with the kind of a mutex initialised
 * here with the same attributes, and refuses a bucket whose word differs.
 * Cost: one 4-byte load and compare; glibc loads the very same word first
 * thing in pthread_mutex_clocklock, in the mutex whose lock word we are
 * about to write, so it brings in no cache line that the lock would not.
 * What it cannot close: a writer that changes the word between our check
 * and glibc's read (or while we hold the lock, before unlock) can still
 * make glibc abort; that writer has write access to the segment, inside
 * the trust boundary (docs/design.md, "Trust model").  A static bad word,
 * from corruption or a planted segment, is always caught.
 *
 * Relocation marker: moving_slot = slot + 1 while a relocation copies that
 * slot to the key's other bucket.  Repair resolves a move cut short: the
 * copy wins if it was made visible (tagged), else the source stays.
 *
 * Repair nests at most one level: resolving a move trylocks the other
 * bucket, whose owner may have died too, so that bucket is repaired inside
 * this repair; that nested repair skips its own move (leaves both copies,
 * srl_check reports the duplicate) and so takes no further lock.  Without
 * this, a segment whose every lock says "owner died" and whose every
 * marker points into the next bucket recursed once per bucket.
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

#ifdef __GLIBC__
/* The kind word of a mutex srl__shm_mutex_init made, computed once (every
 * thread computes the same value, so a race only repeats the work). */
static int own_kind(int *kind)
{
    static int cached = -1;
    int k = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (k < 0) {
        pthread_mutex_t mu;
        int rc = srl__shm_mutex_init(&mu);
        if (rc != 0)
            return rc;
        k = mu.__data.__kind;
        pthread_mutex_destroy(&mu);
        __atomic_store_n(&cached, k, __ATOMIC_RELAXED);
    }
    *kind = k;
    return 0;
}
#endif

int srl__shm_mutex_own_kind(void)
{
#ifdef __GLIBC__
    int k;
    return own_kind(&k) == 0 ? k : -1;
#else
    return -1;
#endif
}

int srl__shm_mutex_kind_check(const struct srl__shm *s, uint64_t b, unsigned *found,
                              unsigned *want)
{
#ifdef __GLIBC__
    int k;
    int rc = own_kind(&k);
    if (rc != 0)
        return rc;
    int f = __atomic_load_n(&srl__shm_bucket(s, b)->mu.__data.__kind, __ATOMIC_RELAXED);
    if (found != NULL)
        *found = (unsigned)f;
    if (want != NULL)
        *want = (unsigned)k;
    return f == k ? 0 : SRL_ECORRUPT;
#else
    /* Another C library keeps the type elsewhere: not checked. */
    (void)s;
    (void)b;
    if (found != NULL)
        *found = 0;
    if (want != NULL)
        *want = 0;
    return 0;
#endif
}

struct timespec srl__shm_deadline(const struct srl__shm *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ms = s->lim.lock_timeout_ms;
    ts.tv_sec += (time_t)(ms / 1000u);
    ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (ts.tv_nsec >= (long)SRL_NS_PER_S) {
        ts.tv_sec++;
        ts.tv_nsec -= (long)SRL_NS_PER_S;
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
