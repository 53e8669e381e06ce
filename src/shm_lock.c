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

static int trylock_at(struct srl__shm *s, uint64_t b, bool nested);

/* A relocation out of b (locked) was cut short: its source slot i and
 * maybe a complete, tagged copy in the key's other bucket both exist.  If
 * the copy is there the source is dropped; if not, the source stays (the
 * copy was never made visible).  If the other bucket is busy both copies
 * may stay; lookups then always use the same one and srl_check reports
 * the duplicate. */
static void resolve_move(struct srl__shm *s, uint64_t b, unsigned i)
{
    const uint8_t *fp = srl__shm_slot(s, b, i);
    uint64_t c1, c2;
    srl__shm_fp_buckets(s, fp, &c1, &c2);
    if (b != c1 && b != c2)
        return;                 /* damaged identity: validation frees it */
    uint64_t other = b == c1 ? c2 : c1;
    if (other == b)
        return;
    /* Only tried, never waited for: the caller may already hold other
     * locks (the slow path's pair, a relocation's three), and a wait here
     * could close a cycle or wait on a lock this thread owns.  A dead
     * owner of `other` is repaired nested, without resolving its own move,
     * so the depth stays one whatever the segment says. */
    if (trylock_at(s, other, true) != 0)
        return;
    struct srl__shm_bucket *ob = srl__shm_bucket(s, other);
    uint8_t tag = srl__shm_bucket(s, b)->tags[i];
    for (unsigned j = 0; j < SRL__SHM_SLOTS; j++) {
        if (ob->tags[j] == tag && memcmp(srl__shm_slot(s, other, j), fp, 16) == 0) {
            srl__shm_tag_store(srl__shm_bucket(s, b), i, 0);
            break;
        }
    }
    srl__shm_unlock(s, other);
}

/* nested: called from resolve_move of another bucket's repair; then a cut
 * short move out of b is not resolved (that would lock a third bucket). */
static void repair(struct srl__shm *s, uint64_t b, uint64_t now, bool nested)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    /* Cleared before resolving: once b is consistent no repair would come
     * back for it, and a nested repair leaves both copies (check finds them). */
    unsigned moving = __atomic_load_n(&bk->moving_slot, __ATOMIC_ACQUIRE);
    __atomic_store_n(&bk->moving_slot, 0, __ATOMIC_RELEASE);
    if (!nested && moving >= 1 && moving <= SRL__SHM_SLOTS && bk->tags[moving - 1] != 0)
        resolve_move(s, b, moving - 1);
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

void srl__shm_repair_bucket(struct srl__shm *s, uint64_t b, uint64_t now)
{
    repair(s, b, now, false);
}

/* Common tail of lock and trylock for a nonzero pthread result. */
static int after_lock(struct srl__shm *s, uint64_t b, int e, bool nested)
{
    struct srl__shm_bucket *bk = srl__shm_bucket(s, b);
    switch (e) {
    case EOWNERDEAD:
        repair(s, b, srl__now(&s->lim), nested);
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

/* One attempt without waiting.  Not pthread_mutex_trylock: glibc's (2.36)
 * robust trylock, on a mutex in the ENOTRECOVERABLE state, returns that code
 * but leaves the lock word held by the caller, so every later locker would
 * time out instead of hearing ENOTRECOVERABLE.  A clocklock whose deadline
 * has passed tries the same compare-and-swap and handles that state right. */
static int try_once(pthread_mutex_t *mu)
{
    static const struct timespec past = {0, 0};
    return pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &past);
}

int srl__shm_lock(struct srl__shm *s, uint64_t b, struct timespec *deadline)
{
    pthread_mutex_t *mu = &srl__shm_bucket(s, b)->mu;
    int rc = srl__shm_mutex_kind_check(s, b, NULL, NULL);
    if (rc != 0)
        return rc;
    /* Uncontended (the common case): no clock read for the deadline. */
    int e = try_once(mu);
    if (e == ETIMEDOUT) {
        if (deadline->tv_nsec < 0)
            *deadline = srl__shm_deadline(s);
        e = pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, deadline);
    }
    return e == 0 ? 0 : after_lock(s, b, e, false);
}

/* nested: inside another bucket's repair (see repair). */
static int trylock_at(struct srl__shm *s, uint64_t b, bool nested)
{
    int rc = srl__shm_mutex_kind_check(s, b, NULL, NULL);
    if (rc != 0)
        return rc;
    int e = try_once(&srl__shm_bucket(s, b)->mu);
    if (e == 0)
        return 0;
    if (e == ETIMEDOUT)
        return 1;       /* busy: not a timed-out wait, not counted */
    return after_lock(s, b, e, nested);
}

int srl__shm_trylock(struct srl__shm *s, uint64_t b)
{
    return trylock_at(s, b, false);
}

void srl__shm_unlock(struct srl__shm *s, uint64_t b)
{
    pthread_mutex_unlock(&srl__shm_bucket(s, b)->mu);
}
