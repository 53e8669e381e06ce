/*
 * cas16.h - the one 16-byte compare-and-swap both stores use (x86-64's
 * lock cmpxchg16b), and the CPU check that says it is there.
 *
 * Why inline assembly: GCC 12 compiles a 16-byte __atomic_compare_exchange
 * to a call into libatomic (unless built with -mcx16, which the library
 * cannot assume of its users' CPUs), and libatomic may take a lock for it,
 * which would not be atomic across processes sharing a segment.  The
 * instruction itself is, and it is one locked operation: the price of one
 * 8-byte CAS, not two.
 *
 * Who uses it:
 *   - shm_lockfree.c: a slot's meta word and GCRA state, in a segment;
 *   - local_store.h (word_update): a node's admission count and GCRA word, so
 *     that a lock-free admission is one locked instruction, not a CAS and
 *     an atomic add.
 * Elsewhere than x86-64 SRL__CAS16 is 0: neither function exists and both
 * users keep their 8-byte paths.  -DSRL_NO_CAS16 builds that fallback on
 * x86-64 too (how it is tested here: meson setup -Dc_args=-DSRL_NO_CAS16).
 *
 * ThreadSanitizer does not see inside the asm.  Every other access to the
 * two words is an __atomic builtin, so it reports nothing false; it also
 * checks nothing of this instruction (the race tests, which count, do).
 */
#ifndef SRL_CAS16_H
#define SRL_CAS16_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) && !defined(SRL_NO_CAS16)
#define SRL__CAS16 1

/* Whether this CPU has cmpxchg16b (CPUID.1:ECX bit 13).  Every x86-64 CPU
 * since 2006 but the first AMD64s has it; a handle checks once, at open. */
static inline bool srl__cpu_has_cas16(void)
{
    unsigned a = 1, b, c, d;
    __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d) : "2"(0u));
    return (c >> 13) & 1u;
}

/* lock cmpxchg16b on the 16-aligned p: {lo, hi} = {*exp_lo, *exp_hi} ->
 * {new_lo, new_hi}; on failure the words found go to *exp_lo, *exp_hi.
 * Relaxed as far as callers may assume (it is a full barrier on x86). */
static inline bool srl__cas16(void *p, uint64_t *exp_lo, uint64_t *exp_hi, uint64_t new_lo,
                              uint64_t new_hi)
{
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*(unsigned __int128 *)p), "+a"(*exp_lo),
                           "+d"(*exp_hi)
                         : "b"(new_lo), "c"(new_hi)
                         : "memory");
    return ok;
}
#else
#define SRL__CAS16 0
#endif

/* Whether the 16-byte CAS exists here, built and on this CPU: the shared
 * store's lock-free path (shm_lockfree.c) is on for a handle that asks only
 * where this is true; the local store's lock-free path exists regardless
 * (its 8-byte fallback).  What the tests expect srl_info.flags to say. */
static inline bool srl__cas16_usable(void)
{
#if SRL__CAS16
    return srl__cpu_has_cas16();
#else
    return false;
#endif
}

#endif
