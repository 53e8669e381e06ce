/*
 * local_lock.c - a node's lock when it is contended: the wait, bounded by
 * lock_timeout_ms, and the wake (local_store.h has the uncontended path,
 * node_trylock, node_lock and node_unlock, inline).
 *
 * THE WORD
 *   n->lock is 0 (free), 1 (held, nobody waits) or 2 (held, a thread may
 *   be waiting): the three-state futex mutex of Drepper's "Futexes Are
 *   Tricky".  Taking is a CAS 0 -> 1; a waiter swaps in 2 before it sleeps,
 *   so the holder's release (an exchange to 0) sees 2 and wakes one
 *   waiter.  A woken waiter takes the lock by swapping in 2 again (it
 *   cannot know whether others wait), so one wake may be spare: harmless.
 *   A waiter that times out leaves the 2 behind: the next release makes a
 *   wake call that wakes nobody, also harmless.  Acquire on taking, release
 *   on giving back: all the holder wrote is seen by the next holder (and
 *   by ThreadSanitizer, which sees these atomics as the lock's edges).
 *
 * WHY NOT A PTHREAD MUTEX
 *   Size.  A glibc mutex is 40 bytes: with the fingerprint it filled a
 *   node's first line, and the node took two lines (128 bytes for a token
 *   bucket).  The word is 4 bytes, and a token bucket's whole node is one
 *   line (local_store.h, struct lnode): half the memory, and at a million keys
 *   half the footprint a hit's miss is taken in.  Nothing the store used
 *   is lost: the lock is private to the process (FUTEX_PRIVATE_FLAG), held
 *   for one decision, never across a call that can fail, and a thread
 *   does not die holding it without its process.
 *
 * THE WAIT
 *   Bounded by lock_timeout_ms on CLOCK_MONOTONIC (FUTEX_WAIT_BITSET takes
 *   an absolute monotonic deadline), so a step of the wall clock cannot
 *   stretch it.  SRL_ETIMEDOUT is counted by the caller (node_lock, in the
 *   shard's timeouts), as with the pthread_mutex_timedlock it replaces.
 *
 * MAY TOUCH
 *   The lock word it is given, nothing else: it knows no store, so the
 *   store's header can call it without the two including each other.
 */
#include "local_lock.h"

#include "srl.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, w, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

int srl__local_node_wait(uint32_t *lock, uint32_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)timeout_ms * 1000000ull;
    dl.tv_sec += (time_t)(ns / SRL_NS_PER_S);
    dl.tv_nsec = (long)(ns % SRL_NS_PER_S);
    while (__atomic_exchange_n(lock, 2, __ATOMIC_ACQUIRE) != 0) {
        /* Sleeps only while the word is still 2: a release between the
         * exchange and the call makes it return at once (EAGAIN). */
        if (futex(lock, FUTEX_WAIT_BITSET, 2, &dl) != 0 && errno == ETIMEDOUT)
            return SRL_ETIMEDOUT;
    }
    return 0;
}

void srl__local_node_wake(uint32_t *lock)
{
    (void)futex(lock, FUTEX_WAKE_BITSET, 1, NULL);
}
