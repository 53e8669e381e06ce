/*
 * wait.c - srl_acquire_wait: a reservation, then the caller's sleep.
 *
 * The decision is srl_reserve's (the limiter's ticker, under the key's
 * lock); the sleep is an absolute CLOCK_MONOTONIC deadline taken right
 * after it, so a signal (EINTR) resumes towards the same deadline: the
 * total sleep never exceeds d->wait_ns <= max_wait_ns, and never falls
 * short of it.  No lock is held while sleeping.  Nothing here is shared.
 */
#include <errno.h>
#include <time.h>

#include "limiter.h"

/* Sleep until CLOCK_MONOTONIC reaches start + ns: 0, or SRL_ESYS. */
static int sleep_until(uint64_t start, uint64_t ns)
{
    uint64_t end = start + ns;   /* ns <= SRL_WAIT_MAX_NS: no overflow */
    struct timespec ts = {.tv_sec = (time_t)(end / SRL_NS_PER_S),
                          .tv_nsec = (long)(end % SRL_NS_PER_S)};
    for (;;) {
        int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        if (rc == 0)
            return 0;
        if (rc != EINTR) {
            errno = rc;
            return SRL_ESYS;
        }
    }
}

int srl_acquire_wait(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                     uint64_t max_wait_ns, srl_decision *d)
{
    int rc = srl_reserve(lim, key, len, cost, max_wait_ns, d);
    if (rc != 0 || !d->allowed || d->wait_ns == 0)
        return rc;
    return sleep_until(srl__clock_ns(CLOCK_MONOTONIC), d->wait_ns);
}
