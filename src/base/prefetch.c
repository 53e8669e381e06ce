/*
 * prefetch.c - whether this CPU has PREFETCHW, read once at load
 * (prefetch.h says why it matters).  Nothing else.
 */
#include "prefetch.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

bool srl__prefetchw_ok;

__attribute__((constructor)) static void srl__prefetch_probe(void)
{
    unsigned a, b, c, d;
    srl__prefetchw_ok = __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
}
#endif
