/*
 * local_lock.h - the contended half of a local node's lock (local_lock.c):
 * a futex word 0 free, 1 held, 2 held and perhaps awaited.  The
 * uncontended half is inline in local_store.h (node_trylock, node_lock,
 * node_unlock); these are what it calls out to.  Knows no store.
 */
#ifndef SRL_LOCAL_LOCK_H
#define SRL_LOCAL_LOCK_H

#include <stdint.h>

/* Wait for *lock and take it (leaving it 2), at most timeout_ms on
 * CLOCK_MONOTONIC: 0, or SRL_ETIMEDOUT (the caller counts it). */
int srl__local_node_wait(uint32_t *lock, uint32_t timeout_ms);
/* Wake one waiter of *lock (after a release that saw 2). */
void srl__local_node_wake(uint32_t *lock);

#endif
