/*
 * prefetch.h - a prefetch for a line the caller is about to write.
 *
 * Why not __builtin_prefetch(p, 1, 3): on x86-64, GCC emits its write hint
 * as a read prefetch (prefetcht0) unless the build targets a CPU with
 * PREFETCHW (-mprfchw), which a distribution's build does not.  A line
 * another core wrote last then arrives shared, and the bucket lock's
 * compare-and-swap (or the first store) must ask for it a second time,
 * exclusive, on the decision's critical path: two workers on two cores
 * deciding on keys of the same buckets pay two transfers per line
 * instead of one.  PREFETCHW asks for the line exclusive at once.
 *
 * Every x86-64 CPU AMD made has it; Intel's enumerate it since Broadwell
 * (CPUID 0x80000001 ECX bit 8).  It is issued only where that bit is set,
 * read once when the library is loaded (prefetch.c), and the read prefetch
 * otherwise: a branch on a flag that never changes.  Elsewhere the
 * builtin's write hint already is a write prefetch (PRFM PSTL1KEEP on
 * arm64).  A prefetch never faults and changes nothing a program can see
 * but its timing.  BENCHMARKS.md, the scaling table, has what it bought.
 */
#ifndef SRL_PREFETCH_H
#define SRL_PREFETCH_H

#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)
extern bool srl__prefetchw_ok;   /* CPUID says PREFETCHW (prefetch.c) */

static inline void srl__prefetch_w(const void *p)
{
    if (__builtin_expect(srl__prefetchw_ok, 1))
        __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
    else
        __builtin_prefetch(p, 1, 3);
}
#else
static inline void srl__prefetch_w(const void *p)
{
    __builtin_prefetch(p, 1, 3);
}
#endif

#endif
