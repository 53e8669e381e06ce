/*
 * srl.h - a host-wide rate limiter for pre-forked servers.
 *
 * OVERVIEW
 *
 * A server calls srl_acquire() before handling each request and gets back a
 * decision: allowed or not, how many requests remain, and how long to wait
 * (the value of an HTTP 429's Retry-After).  A policy says "at most N
 * requests per key per window"; a key is any byte string the caller chooses
 * (user id, API key, client address).
 *
 * Three layers, usable separately:
 *
 *   1. The pure core (srl_state_*): each algorithm is a state machine over a
 *      fixed-size, pointer-free block of bytes, with time passed in.  It does
 *      no I/O, takes no lock and allocates nothing.  Embedders may keep these
 *      states in their own storage.
 *
 *   2. The limiter (srl_limiter): one handle over one of three stores
 *        - srl_open_shared():    a table in a named POSIX shared-memory
 *                                segment, shared by every process of the host
 *                                that opens the same name (PHP-FPM, Apache
 *                                prefork workers);
 *        - srl_open_anonymous(): the same table in an anonymous shared
 *                                mapping, for a parent that creates the
 *                                limiter and then forks its workers;
 *        - srl_open_local():     an in-process store (a pool of states
 *                                behind a lock-free index, liburcu for
 *                                reclamation) for one threaded process;
 *        - srl_open_redis():     states in a Redis server, one limit across
 *                                hosts (see its comment);
 *        - srl_open_tiered():    the Redis store with the host's segment in
 *                                front answering the fleet's denials.
 *      The same srl_acquire / srl_evict_idle / srl_stats calls work on all.
 *
 *   3. Header helpers: Retry-After, RateLimit-Policy and RateLimit field
 *      values (IETF httpapi ratelimit-headers draft).
 *
 * ERRORS
 *
 * Every function that can fail returns int: 0 (SRL_OK) or a non-negative
 * count on success, one of the negative SRL_E* codes below on failure.  A
 * failing call changes nothing unless its description says otherwise.
 * srl_strerror() names any code.  Where an error comes from the operating
 * system (SRL_ESYS), errno still holds the cause when the call returns.
 *
 * TIME
 *
 * Time is a monotonic count of nanoseconds (CLOCK_MONOTONIC by default).  It
 * is read inside the key's lock, so a caller that waited for the lock never
 * brings a stale time in.  Elapsed time that comes out negative (a ticker
 * that went backwards) counts as zero.  All arithmetic is integer; no
 * floating point is used on the decision path.
 *
 * THREADS AND PROCESSES
 *
 * A limiter handle may be used by any number of threads at once.  A shared
 * or anonymous limiter stays valid in children after fork(); an in-process
 * (local) limiter must be created after fork, in the process that uses it.
 * srl_close() must not race with other calls on the same handle.
 *
 * CAVEATS
 *
 *   - Keys are identified by a 128-bit keyed fingerprint (SipHash, random
 *     key per segment), not by their bytes; two distinct keys share a state
 *     with probability below n^2 / 2^129 for n live keys.
 *   - A shared segment is trusted by every process that maps it: anyone who
 *     can write it can change any key's state, and can make glibc write
 *     through pointers kept in its mutexes (robust lists) in every process
 *     that locks them.  So an opener maps only a segment owned by its own
 *     effective uid, or by the one uid it names (srl_config.owner_uid); root
 *     gets no exemption.  Group or other write bits are accepted only if the
 *     caller's srl_config.mode allows them.  Segments are created 0600.  See
 *     docs/design.md, "Trust".
 *   - A worker killed while it holds a bucket lock is repaired by the next
 *     process that takes the lock: the request in flight is rolled back and
 *     every slot of the bucket is validated (see srl_stats.recovered).
 */
#ifndef SRL_H
#define SRL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SRL_API __attribute__((visibility("default")))
#else
#define SRL_API
#endif

#define SRL_VERSION_MAJOR 0
#define SRL_VERSION_MINOR 1
#define SRL_VERSION_PATCH 0

/* ---------------------------------------------------------------- errors */

/*
 * SRL_ERRNO_MAP(XX) is the one list of result codes: XX(name, code, message)
 * for each, in numeric order.  It generates the enum below, srl_strerror()
 * and srl_err_name(); bindings and tools iterate it rather than repeat it.
 * The values are part of the ABI: a new code takes the next free negative
 * number, and no code is ever renumbered.
 */
#define SRL_ERRNO_MAP(XX) \
    XX(OK, 0, "success") \
    XX(EINVAL, -1, "invalid argument")  /* an argument is invalid (NULL, bad flag, ...) */ \
    XX(EPOLICY, -2, "invalid rate-limit policy") \
    XX(ECOST, -3, "cost is zero or exceeds the policy's permits") \
    XX(EKEY, -4, "key is empty or longer than SRL_KEY_MAX bytes") \
    XX(ENOMEM, -5, "out of memory") \
    XX(ENOBUFS, -6, "output buffer too small") \
    XX(ENOENT, -7, "no such segment or key")  /* no such segment, or the key is not tracked */ \
    XX(EEXIST, -8, "segment already exists")  /* the segment exists and SRL_EXCL was given */ \
    XX(EMISMATCH, -9, "segment exists with a different policy or geometry") \
    XX(EFOREIGN, -10, "not an srl segment") \
    XX(EVERSION, -11, "srl segment of an incompatible layout version or ABI") \
    XX(ECORRUPT, -12, "segment is corrupt (header or table inconsistent)") \
    XX(ESTALE, -13, "segment is stale: its creator died before it was ready; unlink it (rlctl destroy)") \
    XX(EACCES, -14, "permission denied (segment owner or mode refused)") \
    XX(ENOSPC, -15, "no room for the segment in /dev/shm or in the memory the kernel can give") \
    XX(ETIMEDOUT, -16, "timed out (a lock, a segment's creator, or a Redis server did not answer in time)")  /* see srl_last_error for which */ \
    XX(ENOTRECOVERABLE, -17, "a bucket lock is not recoverable") \
    XX(ENOTSUP, -18, "operation not supported by this limiter") \
    XX(ESYS, -19, "system or network error (see errno, and srl_last_error for a Redis store)")  /* another operating-system error; see errno */ \
    XX(ETOOBIG, -20, "segment larger than the size guard: pass force (SRL_CONFIG_FORCE)")

#define SRL__ERRNO_ENUM(name, code, msg) SRL_##name = (code),
enum { SRL_ERRNO_MAP(SRL__ERRNO_ENUM) };
#undef SRL__ERRNO_ENUM

/* A static English description of code; never NULL, even for unknown codes. */
SRL_API const char *srl_strerror(int code);

/* The code's name as spelled in this header ("SRL_EINVAL" for SRL_EINVAL,
 * "SRL_OK" for 0), static; NULL for a code that is not in SRL_ERRNO_MAP. */
SRL_API const char *srl_err_name(int code);

/*
 * The calling thread's sentence for its last error of a Redis or tiered
 * store call (open included): which server and what happened, e.g.
 * "connect 127.0.0.1:6390: connection refused", "reply from
 * 127.0.0.1:8080 is not RESP: is it Redis?", "AUTH on /run/redis.sock:
 * WRONGPASS invalid username-password pair ...", "127.0.0.1:6379: no reply
 * within 500 ms".  Each such call clears it when it begins and sets it when
 * it fails, so read it right after the failing call, in the same thread;
 * "" when that error has no detail (other stores: srl_strerror says all).
 * Bytes from the server are shown with non-printable ones as '?'; never a
 * password.  Copies at most len - 1 bytes and a NUL into buf (may be NULL
 * with len 0) and returns the sentence's whole length (< 256).
 * Thread-local: no lock, any thread, any handle.
 */
SRL_API size_t srl_last_error(char *buf, size_t len);

/* ---------------------------------------------------------------- policy */

typedef enum srl_algorithm {
    SRL_TOKEN_BUCKET = 0,     /* burst of N, then N per window (default) */
    SRL_SLIDING_LOG = 1,      /* exact: at most N in any window-long span */
    SRL_SLIDING_COUNTER = 2,  /* two fixed-window counts, weighted estimate */
    SRL_GCRA = 3,             /* token-bucket semantics in one 64-bit word */
    SRL_CONCURRENCY = 4,      /* at most N in flight at once: srl_enter/srl_leave */
    SRL_FIXED_WINDOW = 5      /* at most N in the W that starts at a key's first hit */
} srl_algorithm;

/* Nanoseconds per second: every time in srl is integer nanoseconds. */
#define SRL_NS_PER_S 1000000000ull

/* Limits enforced by srl_policy_validate(). */
#define SRL_PERMITS_MAX UINT32_MAX               /* permits per window */
#define SRL_SLIDING_LOG_PERMITS_MAX 4096u        /* its state is 8 B per permit */
#define SRL_WINDOW_MAX_NS (3660ull * 86400 * SRL_NS_PER_S) /* 3660 days, ~10 years */
#define SRL_CONCURRENCY_MAX 1024u               /* its state is 32 B per unit */

typedef struct srl_policy {
    srl_algorithm algorithm;
    uint32_t permits;         /* N: 1..SRL_PERMITS_MAX */
    uint64_t window_ns;       /* window length: 1..SRL_WINDOW_MAX_NS; for
                                 SRL_CONCURRENCY max_hold, 0 = none */
    uint32_t burst;           /* token_bucket and gcra: capacity, 1..SRL_PERMITS_MAX,
                                 refilled at permits per window; 0 = permits */
    uint32_t reserved0;       /* zero, else SRL_EPOLICY */
    uint64_t penalty_ns;      /* rate limits: a denied key is refused for this
                                 long from the denial (0: none), <= SRL_WINDOW_MAX_NS */
} srl_policy;

/*
 * Parse "ALGO:N/WINDOW" or "N/WINDOW" (token bucket).  ALGO is one of
 * token_bucket, sliding_log, sliding_counter, gcra, fixed_window.
 * fixed_window:N/W admits at most N in a window of W that opens at the
 * first request admitted after the last window ended (not at a multiple of
 * W) and ends exactly W later, when its count is 0 again; a denied request
 * is not counted (no algorithm counts one), and retry_after is the time to
 * the window's end.  It is the counter of Python's `limits` storages
 * (python/srl/limits_storage.py).  WINDOW is a positive
 * integer with an optional count before the unit: "1m", "15m", "500ms",
 * "s" (= 1s, so "10/s" is "10/1s").  Units: ns, us, ms, s, m, h, d.  The
 * count is whole ("1.5s" is refused with "write 1500ms"); English units
 * ("100/minute", "100 per minute", limits' forms) are refused with the
 * srl form as the hint ("100/1m").
 * A token bucket or GCRA may take ",burst=B" after the window: it then holds
 * up to B permits (the largest cost, and what a fresh key may send at once)
 * and refills N per WINDOW, e.g. "token_bucket:100/1m,burst=20" (20 at once,
 * then one per 600 ms).  It decides exactly as "token_bucket:20/12s" (the
 * window scaled to the burst) whenever that window is a whole number of ns;
 * the burst form says it without the arithmetic.  B must refill within
 * SRL_WINDOW_MAX_NS (B * WINDOW / N); burst=N is the same as none.
 * Any rate limit may then take ",penalty=WINDOW": a request it denies (by
 * srl_acquire; srl_peek never bans) bans the key for WINDOW from that
 * denial: every request is refused until then, with retry_after the time
 * left, e.g. "sliding_log:5/1m,penalty=15m" (fail2ban's bantime).  The
 * ban is not extended by the requests it refuses, and a refund does not
 * lift it.  Order: ALGO:N/WINDOW[,burst=B][,penalty=WINDOW].
 * Or "concurrency:N" / "concurrency:N,max_hold=WINDOW": at most N
 * (1..SRL_CONCURRENCY_MAX) requests of a key in flight at once (srl_enter);
 * a unit held longer than max_hold counts as abandoned even if its holder
 * lives (a stuck request; the operator's choice, default none).
 * Returns 0, or SRL_EPOLICY (text malformed or the result invalid), or
 * SRL_EINVAL (NULL argument).  *out is written only on success.
 */
SRL_API int srl_policy_parse(const char *text, srl_policy *out);

/*
 * Why a policy text was refused: the bad part is text[offset ..
 * offset+length) (length 0: something is missing at offset), and message
 * says what is wrong and how to fix it, NUL-terminated English without the
 * text's control bytes, e.g. "unknown algorithm 'tokenbucket' (did you mean
 * token_bucket?)", "unknown option 'burts' (did you mean burst?)" or
 * "unknown unit 'min' (write 1m; units: ns us ms s m h d)".
 */
#define SRL_POLICY_ERROR_MAX 128
typedef struct srl_policy_error {
    uint32_t offset;          /* byte offset of the bad part in the text */
    uint32_t length;          /* its length in bytes */
    char message[SRL_POLICY_ERROR_MAX];
    uint64_t reserved[4];     /* room to grow; zeroed */
} srl_policy_error;

/*
 * srl_policy_parse, and on failure fills *err (if err is not NULL) with
 * where and why.  On success err is zeroed (message "").  Same returns.
 */
SRL_API int srl_policy_parse_ex(const char *text, srl_policy *out, srl_policy_error *err);

/* 0 if p is valid, else SRL_EPOLICY (or SRL_EINVAL for NULL). */
SRL_API int srl_policy_validate(const srl_policy *p);

/*
 * Write the canonical text of p ("token_bucket:100/1m", the largest unit
 * that divides the window exactly) into buf, NUL-terminated.  Returns the
 * length written (excluding the NUL), SRL_EPOLICY for an invalid policy, or
 * SRL_ENOBUFS if len is too small.  SRL_POLICY_TEXT_MAX always suffices.
 */
#define SRL_POLICY_TEXT_MAX 64
SRL_API int srl_policy_format(const srl_policy *p, char *buf, size_t len);

/* "token_bucket", ... ; NULL for an unknown value. */
SRL_API const char *srl_algorithm_name(srl_algorithm a);

/* -------------------------------------------------------------- decision */

/* srl_decision.flags */
#define SRL_DECISION_UNTRACKED 0x1u /* table full: decided by on_full, not by a state */
#define SRL_DECISION_DEGRADED 0x2u  /* lock timed out: decided by on_full, see srl_acquire */
#define SRL_DECISION_WOULD_DENY 0x4u /* dry run (SRL_CONFIG_DRY_RUN): the limiter would
                                       have denied; allowed is 1, the rest as denied */
#define SRL_DECISION_LOCAL 0x8u     /* tiered: a denial answered by the host's
                                       memory of the fleet's, no round trip */

typedef struct srl_decision {
    int allowed;              /* 1 allowed, 0 denied */
    uint32_t limit;           /* the policy's permits */
    uint32_t remaining;       /* requests of cost 1 still allowed now */
    uint64_t retry_after_ns;  /* 0 when allowed; else the wait until this cost passes */
    uint64_t reset_after_ns;  /* until the key is at rest (indistinguishable from new) */
    unsigned flags;           /* SRL_DECISION_* */
    uint32_t binding;         /* compound (srl_limits): index of the binding
                               * limit, the one that denied (the largest
                               * retry_after among those that denied) or,
                               * when allowed, the one with the least
                               * remaining (first on a tie); 0 for one limit */
    uint64_t wait_ns;         /* srl_reserve: how long the caller must wait
                                 before acting on an admission (0: act now);
                                 0 from every other call */
    uint64_t reserved[2];     /* room to grow; zeroed */
} srl_decision;

/* ---------------------------------------------------------------- ticker */

/* Monotonic nanoseconds.  Called inside the key's lock, so it must not call srl. */
typedef uint64_t (*srl_ticker_fn)(void *ctx);

typedef struct srl_ticker {
    srl_ticker_fn now;        /* NULL: srl_default_ticker(&policy) */
    void *ctx;
} srl_ticker;

/* CLOCK_MONOTONIC in nanoseconds (~20-30 ns a read).  Pass it as the
 * ticker to insist on the precise clock whatever the policy. */
SRL_API uint64_t srl_monotonic_ns(void *ignored);

/* CLOCK_MONOTONIC_COARSE in nanoseconds (~5 ns a read): the precise time
 * of the last timer tick, so up to its resolution behind, never ahead. */
SRL_API uint64_t srl_monotonic_coarse_ns(void *ignored);

/* The coarse clock's resolution r in nanoseconds (clock_getres; 4 ms on
 * a kernel with HZ=250), UINT64_MAX if the system has no coarse clock. */
SRL_API uint64_t srl_coarse_resolution_ns(void);

/*
 * The ticker a limiter opened without one reads: srl_monotonic_coarse_ns
 * when the policy's emission interval T = window/permits is at least 100 r
 * (token_bucket:100/1m has T = 600 ms: coarse on a 4 ms kernel), else
 * srl_monotonic_ns (100/1s: T = 10 ms).  What the coarse clock can cost,
 * worst case, against an exact clock:
 *   - a decision is the one the exact clock would give up to r earlier;
 *   - so retry_after and reset_after are up to r longer (at most 1 % of T),
 *     and a request up to r early is denied that would just have passed;
 *   - the count admitted over any real interval of length L is at most
 *     what the exact limiter admits over L + r: for the token bucket and
 *     GCRA at most r/T (1/100) of a permit more per interval on average,
 *     and never more than one extra permit; a burst is never larger.
 * Every process that opens one segment with the same policy and no ticker
 * makes the same choice.  Injected tickers (tests, srl_state_*) are
 * untouched by this rule.  Never NULL.
 */
SRL_API srl_ticker_fn srl_default_ticker(const srl_policy *p);

/* ------------------------------------------------------- the pure core */

/*
 * Bytes of state one key needs under policy p, or 0 if p is invalid.  States
 * are pointer-free and position-independent: they may be copied, kept in
 * shared memory or on disk, and need 8-byte alignment.
 */
SRL_API size_t srl_state_size(const srl_policy *p);

/* Make state a fresh key's state at time now.  Returns 0 or SRL_EPOLICY/EINVAL. */
SRL_API int srl_state_init(const srl_policy *p, void *state, uint64_t now);

/*
 * Ask for cost permits at time now.  Fills *d and returns 0; the state is
 * written only if the request is allowed (a denied request takes nothing).
 * Errors: SRL_ECOST (cost 0 or cost > permits: such a request can never
 * pass), SRL_EPOLICY, SRL_EINVAL; on error neither state nor *d changes.
 */
SRL_API int srl_state_acquire(const srl_policy *p, void *state, uint64_t now,
                              uint32_t cost, srl_decision *d);

/* The decision srl_state_acquire would give, without changing state. */
SRL_API int srl_state_peek(const srl_policy *p, const void *state, uint64_t now,
                           uint32_t cost, srl_decision *d);

/*
 * Give back cost permits that an admitted request took, at time now.  Exact
 * per algorithm and never above a fresh state:
 *   token_bucket     cost tokens are added, up to the capacity;
 *   gcra             the TAT moves back by cost emission intervals, not
 *                    before now;
 *   sliding_log      the newest cost entries still in the window are dropped;
 *   sliding_counter  the current window's count drops by cost (not below 0);
 *   fixed_window     the open window's count drops by cost (not below 0),
 *                    the window keeps its end.
 * So a refund right after an admission of cost c restores the state (and
 * every later decision) as if that admission had asked for c - cost; a
 * refund of a reservation's cost cancels it (srl_state_reserve).  A
 * refund on a state at rest changes nothing.  Returns 0, or SRL_ECOST (cost
 * 0 or above permits), SRL_EPOLICY, SRL_EINVAL; on error state is unchanged.
 */
SRL_API int srl_state_refund(const srl_policy *p, void *state, uint64_t now, uint32_t cost);

/*
 * 1 if state at time now is indistinguishable from a fresh state (dropping
 * it changes no future decision), 0 if not, negative on invalid arguments.
 */
SRL_API int srl_state_at_rest(const srl_policy *p, const void *state, uint64_t now);

/*
 * 1 if state satisfies every invariant of its algorithm at time now, 0 if
 * not.  Crash repair resets states that fail this check.
 */
SRL_API int srl_state_valid(const srl_policy *p, const void *state, uint64_t now);

/*
 * SRL_CONCURRENCY through the pure core: srl_state_peek reports whether a
 * unit is free (remaining = units an entry of cost would leave free), srl_state_at_rest is "nothing in
 * flight", srl_state_valid checks the holder table.  srl_state_acquire and
 * srl_state_refund return SRL_ENOTSUP: a unit needs a recorded holder, so
 * it is taken by srl_enter and given back by srl_leave.
 */

/*
 * Waiting instead of refusing (Guava's acquire, Go's Reserve, nginx's
 * limit_req delay): srl_state_reserve takes cost permits now for the first
 * instant, at most max_wait_ns from now, at which the request passes, and
 * returns in d->wait_ns how long the caller must wait before acting.  A
 * reservation is exactly an admission at the instant now + wait_ns (the
 * state afterwards is the one srl_state_acquire at that instant leaves),
 * so actions taken when their waits end keep the policy to the nanosecond,
 * however many callers reserve, first come first served.
 *   - Allowed without waiting: exactly srl_state_acquire (wait_ns 0).
 *   - Allowed after a wait: allowed 1, wait_ns > 0, remaining 0 (nothing is
 *     free before the wait ends), retry_after 0, reset_after from now.
 *   - A request that would wait more than max_wait_ns takes nothing and is
 *     denied with retry_after = the time until a reservation with the same
 *     max_wait_ns would succeed (its plain retry_after minus max_wait_ns),
 *     or longer if a ban period (",penalty=") starts or runs: a banned key
 *     is refused, never queued past its ban, and a denial here bans as
 *     srl_state_acquire's does.
 *   - max_wait_ns 0 is srl_state_acquire exactly, for every algorithm.
 * Which algorithms wait: token_bucket (its bucket goes into debt: the
 * stored refill time moves to the instant of the action, so a later request
 * sees no tokens until the debt is paid; needs permits <= window_ns, one
 * token per ns at most, so no whole token is left over at a future time)
 * and gcra (the TAT moves ahead by up to max_wait_ns).  sliding_log,
 * sliding_counter and concurrency return SRL_ENOTSUP for max_wait_ns > 0:
 * an entry stamped in the future would not be given back exactly.
 * max_wait_ns above SRL_WAIT_MAX_NS is SRL_EINVAL.
 * A reservation that will not be used is cancelled with srl_state_refund of
 * the same cost: the state decides again exactly as before the reservation
 * (the token bucket's refill time moves back, not before now; GCRA's TAT
 * moves back, not before now), but for a token bucket's reservation of its
 * whole capacity, which the bucket reaches in mid-nanosecond: the cap hides
 * that fraction, and the cancelled state is stricter (never looser) by
 * less than one nanosecond of refill.  Other errors as srl_state_acquire.
 */
#define SRL_WAIT_MAX_NS (3600ull * SRL_NS_PER_S) /* the longest reservation, 1 h */
SRL_API int srl_state_reserve(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                              uint64_t max_wait_ns, srl_decision *d);

/* ------------------------------------------------- compound policies */

/*
 * A compound policy: one to SRL_LIMITS_MAX limits, every one of which must
 * admit a request ("10 per second and 1000 per day").  All or nothing: a
 * request is admitted only if every limit admits it, and then it takes cost
 * from every limit; if any limit denies, it takes from none.
 *
 * Text: the limits' texts joined by '+', spaces around '+' ignored, e.g.
 * "token_bucket:10/1s + token_bucket:1000/1d".  The canonical text joins
 * the canonical limits with " + " in the order given (order matters only
 * for srl_decision.binding).  A single limit's text is a compound of one.
 *
 * One key's state under a compound is the limits' states one after the
 * other, each at an 8-byte aligned offset (srl_limits_state_offset).
 */
#define SRL_LIMITS_MAX 4
#define SRL_LIMITS_TEXT_MAX (SRL_LIMITS_MAX * (SRL_POLICY_TEXT_MAX + 3))

typedef struct srl_limits {
    uint32_t count;           /* 1..SRL_LIMITS_MAX */
    uint32_t reserved0;       /* zero */
    srl_policy limit[SRL_LIMITS_MAX];  /* limit[0..count) used; the rest zeroed */
    uint64_t reserved[4];     /* room to grow; zeroed */
} srl_limits;

/* A compound of one: *out = {1, p}.  Returns 0 or SRL_EPOLICY/SRL_EINVAL. */
SRL_API int srl_limits_of(const srl_policy *p, srl_limits *out);

/*
 * Parse a compound text.  Errors as srl_policy_parse_ex, the offset counted
 * in the whole text; also "more than 4 limits" and "empty limit" (a '+'
 * with nothing on one side).  *out is written only on success.
 */
SRL_API int srl_limits_parse_ex(const char *text, srl_limits *out, srl_policy_error *err);

/* 0 if 1 <= count <= SRL_LIMITS_MAX and each limit is valid, else SRL_EPOLICY
 * (SRL_EINVAL for NULL). */
SRL_API int srl_limits_validate(const srl_limits *l);

/* The canonical text, as srl_policy_format.  SRL_LIMITS_TEXT_MAX suffices. */
SRL_API int srl_limits_format(const srl_limits *l, char *buf, size_t len);

/* Bytes of one key's state under l (a multiple of 8), 0 if l is invalid. */
SRL_API size_t srl_limits_state_size(const srl_limits *l);

/* Byte offset of limit i's state inside the compound state; 0 if l is
 * invalid or i >= count. */
SRL_API size_t srl_limits_state_offset(const srl_limits *l, uint32_t i);

/*
 * srl_state_* over a compound.  acquire: cost must be 1..permits of every
 * limit (else SRL_ECOST); the decision is the binding limit's: allowed only
 * if all admit, remaining the least over the limits, retry_after the largest
 * among the limits that deny, reset_after the largest over the limits,
 * limit and binding those of the binding limit.  A denied request writes no
 * limit's state.  refund gives cost back to every limit (cost must be
 * 1..permits of every limit, as for acquire); at_rest and valid hold
 * when they hold for every limit.  Errors as the single-limit calls.
 */
SRL_API int srl_limits_state_init(const srl_limits *l, void *state, uint64_t now);
SRL_API int srl_limits_state_acquire(const srl_limits *l, void *state, uint64_t now,
                                     uint32_t cost, srl_decision *d);
SRL_API int srl_limits_state_peek(const srl_limits *l, const void *state, uint64_t now,
                                  uint32_t cost, srl_decision *d);
SRL_API int srl_limits_state_refund(const srl_limits *l, void *state, uint64_t now,
                                    uint32_t cost);
/*
 * srl_state_reserve over a compound: every limit reserves or none does.
 * The wait is the largest of the limits' waits, and every limit takes cost
 * at that one instant (a limit taken earlier than the action would let
 * delayed actions bunch up).  Denied (nothing taken) if that wait exceeds
 * max_wait_ns or a limit is banned; SRL_ENOTSUP for max_wait_ns > 0 if any
 * limit cannot wait.  A refund cancels it exactly for the binding limit;
 * a limit whose own wait was shorter may come back stricter (never looser)
 * than before, since it was taken at the later instant.
 */
SRL_API int srl_limits_state_reserve(const srl_limits *l, void *state, uint64_t now,
                                     uint32_t cost, uint64_t max_wait_ns, srl_decision *d);
SRL_API int srl_limits_state_at_rest(const srl_limits *l, const void *state, uint64_t now);
SRL_API int srl_limits_state_valid(const srl_limits *l, const void *state, uint64_t now);

/* -------------------------------------------------------------- limiter */

typedef struct srl_limiter srl_limiter;   /* opaque */

typedef enum srl_on_full {
    SRL_ON_FULL_ALLOW = 0,    /* table full: allow and count it (default) */
    SRL_ON_FULL_DENY = 1      /* table full: deny and count it */
} srl_on_full;

/* srl_config.owner_uid: trust no uid but the caller's effective uid. */
#define SRL_OWNER_SELF UINT32_MAX

#define SRL_KEY_MAX 4096u           /* longest key srl_acquire accepts, bytes */
#define SRL_KEY_DISPLAY_MAX 255u    /* longest display copy kept per key */
#define SRL_CAPACITY_MAX (1ull << 32)

typedef struct srl_config {
    srl_policy policy;        /* the limit, when limits.count is 0 */
    uint64_t capacity;        /* keys to hold; rounded up to whole buckets */
    uint32_t key_display;     /* leading key bytes kept for rlctl, 0..255 (default 0) */
    uint32_t mode;            /* permissions of a created segment, and the most an
                                 opened one may grant others (default 0600) */
    srl_on_full on_full;      /* what a full table (or a stuck lock) decides */
    uint32_t lock_timeout_ms; /* bounded lock wait, every store (default 1000) */
    srl_ticker ticker;        /* time source (default CLOCK_MONOTONIC) */
    uint32_t owner_uid;       /* besides the caller's euid, the one uid whose
                                 segments are trusted (default SRL_OWNER_SELF) */
    srl_limits limits;        /* a compound policy (srl_limits_parse_ex): when
                                 count > 0 it is the policy and `policy` is
                                 ignored (default count 0) */
    const struct srl_tier *tiers; /* tiers 1..tier_count (see TIERS below);
                                 tier 0 is the policy above.  Copied at open */
    uint32_t tier_count;      /* 0..SRL_TIERS_MAX-1 (default 0: one tier) */
    uint32_t flags;           /* SRL_CONFIG_*: this opener's choices, not the
                                 segment's (never stored, never compared) */
    uint64_t reserved[2];     /* room to grow; zeroed by srl_config_init */
} srl_config;

/*
 * srl_config.flags.
 *
 * SRL_CONFIG_DRY_RUN: this handle never refuses.  Every srl_acquire and
 * srl_enter is decided, written and counted exactly as without the flag
 * (the key's state, srl_stats.allowed/denied and the per-key counts are
 * those an enforcing limiter would have after the same requests), but a
 * decision that would deny comes back with allowed = 1 and
 * SRL_DECISION_WOULD_DENY set; limit, remaining, retry_after_ns,
 * reset_after_ns and binding stay the denial's (so retry_after_ns > 0 says
 * how long an enforcing limiter would refuse).  A would-be denial takes
 * nothing, as a denial does (a ",penalty=" ban starts as it would), and is
 * counted in srl_stats.would_deny too.  srl_enter: a would-be refusal is
 * admitted without a unit (lease->gen = 0, so srl_leave says SRL_ENOENT):
 * units in flight stay those of the enforcing limiter, never above N.
 * On_full decisions (a full table, SRL_DECISION_UNTRACKED, and a stuck
 * lock, SRL_DECISION_DEGRADED) that deny are turned the same way; the
 * degraded ones are not counted (they never are).  srl_peek turns its
 * answer likewise and counts nothing.  The flag is per handle: an enforcing
 * and a dry-run handle may share one segment (mod_srl's SrlDryRun per
 * <Location>), each deciding on the same states.
 */
#define SRL_CONFIG_DRY_RUN 0x1u

/*
 * SRL_CONFIG_FLOOD_CACHE: this handle of a shared or anonymous store keeps
 * a denial-flood cache, for a server under attack (one key at many times
 * its limit from every worker).  Such a handle remembers, per thread, a key
 * it saw denied under the key's lock (a private copy of the state, the
 * bucket's generation word and the policy generation) and answers the key's
 * next plain srl_acquire / srl_acquire_tier calls from that copy without
 * taking the lock or writing the segment, while the bucket and the policy
 * have not changed and the copy still denies without writing: the answer is
 * exactly the one the lock would give, every field (docs/design.md, "The
 * denial-flood cache").  Not cached: srl_enter (and every policy with a
 * concurrency limit), srl_reserve with a wait, srl_peek, states above 256
 * bytes.  The price, and why it is not the default: the denials answered so
 * reach the segment's counters later (see srl_stats_get), so rlctl info and
 * metrics read by another process lag behind until each worker flushes (an
 * idle worker holds its pending counts until its next locked decision in
 * that bucket, srl_stats_get or close).  Other stores ignore the flag.
 */
#define SRL_CONFIG_FLOOD_CACHE 0x2u

/*
 * SRL_CONFIG_LOCKFREE: decide a tracked key's plain srl_acquire without a
 * lock where the policy's state is one 64-bit word.
 *
 * In a shared or anonymous store: the handle decides a key it finds, under
 * a GCRA tier, without the bucket lock: one 16-byte compare-and-swap of the
 * slot's sequence word and TAT (docs/design.md, "Lock-free GCRA (layout
 * 7)").  Taken only by a plain srl_acquire / srl_acquire_tier of a key
 * already in the table whose tier is one GCRA limit with no ban period, on
 * a segment created with a GCRA limit in some tier (its slots are then
 * 16-byte aligned), on a CPU with cmpxchg16b (x86-64); everything else (a
 * new key, a tier change, token bucket, the sliding algorithms, compounds
 * of several limits, penalties, srl_enter, srl_reserve with a wait,
 * refunds, dry run) takes the lock as without the flag, and the answers
 * are the same either way; handles with and without it may share a
 * segment.  A crash mid-decision leaves nothing to repair.  What it costs:
 * once any handle with the flag has opened the segment (or the creator
 * had it), every decision on it, locked or not, counts with atomic adds
 * and orders its slot writes with a fence (layout 8; before that, locked
 * decisions keep plain adds: about 15 % of a decision at 1k keys); a
 * handle with the flag on a segment created without it takes and drops
 * every bucket's lock before its first lock-free decision (one pass, at
 * that decision, never at open: 65536 buckets for 1M keys; a lock out of
 * reach past lock_timeout_ms leaves that handle on the locked path for
 * good, and srl_info.flags without SRL_CONFIG_LOCKFREE); a decision that
 * loses its CAS to a concurrent one retries a few times, then takes the
 * lock; a slot being written under the lock sends the decider to the
 * lock.  GCRA slots grow to a multiple of 16 bytes.
 *
 * In the in-process store (srl_open_local): a handle whose policy is one
 * GCRA limit (no other limit in the compound, no ",penalty=", not
 * SRL_CONFIG_DRY_RUN) decides srl_acquire on a key it finds with one
 * compare-and-swap of the key's TAT: no mutex, nothing to undo (a denial
 * writes nothing).  The answers, the states and srl_stats_get are exactly
 * those of the locked path: srl_reset_key, srl_evict_idle and the
 * reclamation of a full table retire a state with a compare-and-swap too,
 * so an acquire never lands on a retired or reused state, and a key's
 * counts are moved to the totals only once no such acquire can still be
 * counting it.  srl_reserve with a wait, srl_refund, srl_peek and srl_foreach
 * keep the key's lock (their writes are compare-and-swaps as well).  Every
 * other policy is decided under the lock as without the flag; the flag is
 * then accepted and changes nothing.  On x86-64 an admission adds to the
 * key's allowed count in the same 16-byte compare-and-swap (one locked
 * instruction, where the locked path pays two for its mutex); elsewhere,
 * and for every other count, the per-key counters become atomic adds on
 * the key's own line (docs/design.md, "Lock-free GCRA in the in-process
 * store").  The Redis store accepts the flag and changes nothing.
 */
#define SRL_CONFIG_LOCKFREE 0x4u

/*
 * SRL_CONFIG_FORCE: a creator of a segment larger than
 * SRL_SEGMENT_GUARD_BYTES means that size.  Without it such a creation is
 * SRL_ETOOBIG even if memory would hold it (a capacity typo, 400M for
 * 400k, must not reserve tens of GiB); with it, it is made if it fits.  A
 * segment that does not fit is SRL_ENOSPC either way (srl_room_check).
 * Openers of an existing segment, and other stores, ignore it.
 */
#define SRL_CONFIG_FORCE 0x8u

/*
 * TIERS: one segment, several named policies ("free" 100 a minute, "paid"
 * 10000).  Tier 0 is the config's own policy, named "default"; the config
 * may add up to SRL_TIERS_MAX - 1 more (cfg->tiers[i] is tier i + 1).  A
 * name is 1..SRL_TIER_NAME_MAX bytes of [A-Za-z0-9_-], unique, not
 * "default", NUL-padded in its array.  Each tier's limits follow the
 * srl_limits rules, but no tier of a tiered config (tier_count > 0) may
 * hold a concurrency limit: SRL_EPOLICY.  Every slot is sized for the
 * largest tier's state.  The table belongs to the segment: an opener
 * passing another table gets SRL_EMISMATCH; SRL_ADOPT takes the segment's.
 *
 * A key's slot records its tier.  srl_acquire is srl_acquire_tier with
 * tier 0; srl_peek, srl_refund and srl_key_state use the tier the key has.
 * A request naming another tier than the key's converts the key's state
 * first, under its lock (docs/design.md, "Tiers and live changes"):
 *   - if the two tiers have the same number of limits and limit i of each
 *     has the same algorithm, each limit carries its use over: used = the
 *     old capacity (burst, else permits) - what the old limit had left for
 *     cost 1 now; the new state is a fresh one that then took
 *     min(used, new capacity) at now.  So a key that used 10 of 10 has 10
 *     left under a limit of 20, and one that used 50 of 100 has none under
 *     a limit of 10: never more than a fresh key would have.  A ban in
 *     force (",penalty=") ends at conversion; its limit stays used up.
 *     A fixed_window limit without penalties keeps its open window instead:
 *     same start, count min(count, new N), unless the new window length
 *     has already ended it (then fresh); its end moves to start + new W.
 *   - otherwise the key starts fresh under the new tier.
 * Stores: shared and anonymous.  srl_open_local and srl_open_redis refuse
 * a config with tiers (SRL_ENOTSUP); srl_acquire_tier on them takes tier 0
 * only.
 */
#define SRL_TIERS_MAX 16u
#define SRL_TIER_NAME_MAX 31u

typedef struct srl_tier {
    char name[SRL_TIER_NAME_MAX + 1];   /* NUL-terminated, NUL-padded */
    srl_limits limits;
} srl_tier;

/* Defaults: token_bucket:100/1m, capacity 65536, display 0, mode 0600,
 * allow on full, 1000 ms lock timeout, the policy's default clock
 * (srl_default_ticker), owner self, no compound (limits.count 0). */
SRL_API void srl_config_init(srl_config *cfg);

/*
 * CONFIGURATION TEXT: the one text form of everything a limiter is opened
 * with, what every binding (rlctl create, mod_srl's SrlLimiter, Python's
 * keyword arguments, PHP's options) goes through.
 *
 *   spec   = POLICY *( SPACE NAME "=" VALUE )
 *   e.g.     token_bucket:100/1m capacity=65536 key_display=32 on_full=deny
 *            tier.paid=token_bucket:10000/1m
 *
 * POLICY is a compound text (srl_limits_parse_ex; spaces around '+' do not
 * split it), first; it may be given as policy=POLICY.  Options, each at most
 * once, names in any case:
 *   capacity=N         keys, 1..SRL_CAPACITY_MAX; a suffix k, M or G counts
 *                      in 1000s (64k = 64000)                  (default 65536)
 *   key_display=N      bytes, 0..SRL_KEY_DISPLAY_MAX                      (0)
 *   mode=OCTAL         permission bits 0..0777, e.g. 0660               (0600)
 *   on_full=allow|deny                                                (allow)
 *   lock_timeout_ms=N  milliseconds, 0..UINT32_MAX                     (1000)
 *   owner=UID|self     srl_config.owner_uid, 0..UINT32_MAX-1          (self)
 *   dry_run= lockfree= flood_cache= force=   BOOL: SRL_CONFIG_* flags  (off)
 *   tier.NAME=POLICY   a tier (srl.h TIERS), in the order given, NAME as
 *                      srl_tier_name_check, not "default", each once
 *   redis=URI          a Redis store (srl_redis_uri_check), for
 *                      srl_open_tiered: kept beside the config, read with
 *                      srl_config_redis (srl_config has no uri field)
 *   fallback=POLICY    srl_open_tiered: while Redis does not answer, the
 *                      host decides with POLICY (rate limits, a compound
 *                      too), exactly, in the segment NAME.fallback; a spec
 *                      with it needs redis= (srl_config_set does not)
 * BOOL is on/off, yes/no, true/false or 1/0; every enum word (allow, deny,
 * self, BOOL) in any case.  A spec with redis= refuses key_display, mode,
 * tiers, lockfree and flood_cache (a Redis store has none of them) and takes
 * one rate limit only; a spec with lockfree=on needs a gcra limit in some
 * tier (it would decide nothing otherwise).  srl_config_set, for a program's
 * arguments, applies the redis rules but not the lockfree one, as the open
 * calls do.
 *
 * Errors (SRL_EPOLICY) fill err: offset and length of the bad part in spec
 * (for srl_config_set: in the text NAME=VALUE, so an offset past the name
 * and its '=' is in the value), and a message saying what is expected, e.g.
 * "capacity must be a number of keys, 1..4294967296 (suffix k, M or G:
 * 1000s)" or "unknown option 'capasity' (did you mean capacity?)";
 * srl_config_set says "expected a number of keys, ..." (the caller names
 * the option in its own words).  Policies' own errors are
 * srl_limits_parse_ex's, the offset counted in spec.
 *
 * Ownership: a config that srl_config_parse or srl_config_set gave tiers or
 * a uri owns them: cfg->tiers then points at a block of SRL_TIERS_MAX - 1
 * tiers (and the uri) that srl_config_free releases; the open calls copy
 * what they need, so free it once the limiter is open.  cfg->tiers must be
 * NULL (srl_config_init) or such a block when passed to srl_config_set; a
 * table of the caller's own is never freed here, but do not mix the two.
 */
#define SRL_CONFIG_URI_MAX 1024u   /* longest redis= uri, bytes */
#define SRL_CONFIG_TEXT_MAX 8192u  /* srl_config_format never needs more */

/*
 * Write the config of spec into *cfg (from srl_config_init's defaults).
 * Returns 0, SRL_EPOLICY (err says where and why; *cfg untouched),
 * SRL_EINVAL (NULL argument) or SRL_ENOMEM.  *cfg is overwritten: free an
 * earlier parse's config first.
 */
SRL_API int srl_config_parse(srl_config *cfg, const char *spec, srl_policy_error *err);

/*
 * Set one option of *cfg: name as in the grammar ("capacity", "tier.paid",
 * "policy"), value its text ("64k").  A tier given again is refused.
 * Returns as srl_config_parse; on error *cfg is unchanged.
 */
SRL_API int srl_config_set(srl_config *cfg, const char *name, const char *value,
                           srl_policy_error *err);

/*
 * The canonical spec of cfg: the policy, capacity, then every option that
 * is not its default, in the order above; srl_config_parse of it gives cfg
 * again (field for field, tiers by content).  Returns the length (without
 * the NUL), SRL_ENOBUFS (len too small; SRL_CONFIG_TEXT_MAX suffices),
 * SRL_EPOLICY (an invalid policy) or SRL_EINVAL.
 */
SRL_API int srl_config_format(const srl_config *cfg, char *buf, size_t len);

/* The redis= uri a parse or set gave cfg, or NULL. */
SRL_API const char *srl_config_redis(const srl_config *cfg);

/* Release what srl_config_parse/set gave cfg (tiers, uri); cfg->tiers becomes
 * NULL and tier_count 0.  Safe on a config that owns nothing. */
SRL_API void srl_config_free(srl_config *cfg);

/*
 * The callers whose own words the library's messages use: a message that
 * names a way to do something ("open with SRL_CHANGE") names it as that
 * caller's users write it ("Srl::CHANGE", "change=True").
 */
typedef enum srl_binding {
    SRL_BINDING_C = 0,
    SRL_BINDING_RLCTL = 1,
    SRL_BINDING_PYTHON = 2,
    SRL_BINDING_PHP = 3,
    SRL_BINDING_APACHE = 4,
    SRL_BINDING_COUNT = 5
} srl_binding;

/* How binding b's users write `what` ("change", "policy", "capacity",
 * "key_display", "tier", "redis", "lockfree"), e.g. (PHP, "change") is
 * "Srl::CHANGE"; NULL for an unknown binding or word. */
SRL_API const char *srl_binding_word(srl_binding b, const char *what);

/* srl_open_shared() flags */
#define SRL_CREATE 0x1u       /* create the segment if it does not exist */
#define SRL_EXCL 0x2u         /* with SRL_CREATE: fail with SRL_EEXIST if it exists */
#define SRL_ADOPT 0x4u        /* take the segment's policy and geometry, not cfg's */
#define SRL_CHANGE 0x8u       /* an existing segment whose current policy differs
                                 from cfg's takes cfg's (srl_policy_change) instead
                                 of refusing it with SRL_EMISMATCH; needs cfg, not
                                 with SRL_ADOPT */

/*
 * Segment names: an optional leading "/", then 1..SRL_NAME_MAX bytes of
 * [A-Za-z0-9._-], not all dots ("." and ".." name the directory, and no
 * tool could remove "...").  srl_name_check() returns 0 or SRL_EINVAL; every
 * srl call that takes a name, rlctl and mod_srl apply this one rule.
 */
#define SRL_NAME_MAX 200u
SRL_API int srl_name_check(const char *name);

/*
 * Open the segment /dev/shm/NAME.  Any number of processes may race to
 * create it: exactly one initialises it, the others wait (bounded) until it
 * is ready.  An existing segment is used only if its current policy (its
 * tier table included) and capacity equal cfg's: otherwise SRL_EMISMATCH.
 * With SRL_CHANGE, a segment whose capacity, key_display and tier names
 * equal cfg's but whose policy differs is changed to cfg's policy, live,
 * as srl_policy_change does (a graceful restart with a raised limit keeps
 * every key's use); what cannot change is still SRL_EMISMATCH.  Every
 * SRL_CHANGE opener imposes its config: while old and new configs both open
 * (a rolling restart of processes that reopen), they would change it back
 * and forth, each change converting every key (never more than the bound
 * of LIVE POLICY CHANGES, but to no purpose); reopen with the new one only.
 * With
 * SRL_ADOPT (not with SRL_CREATE), or with cfg NULL, the segment's own
 * current policy (all its limits: srl_info.limits), geometry and on_full
 * are adopted; cfg (if given) still supplies owner_uid, mode,
 * lock_timeout_ms and the ticker.
 *
 * Before anything of the segment is read, the file must be a regular file
 * owned by the caller's effective uid or by cfg->owner_uid, granting write
 * to group or others only as far as cfg->mode (default 0600) allows:
 * otherwise SRL_EACCES, at once.  Then its header must be intact (magic,
 * layout version, ABI, a checksum over every field, geometry recomputed
 * from its policy, size against the file).
 * Errors: SRL_EINVAL, SRL_EPOLICY, SRL_ENOENT, SRL_EEXIST, SRL_EMISMATCH,
 * SRL_EFOREIGN, SRL_EVERSION, SRL_ECORRUPT, SRL_ESTALE, SRL_EACCES,
 * SRL_ENOSPC, SRL_ETOOBIG (ROOM below), SRL_ETIMEDOUT, SRL_ENOMEM, SRL_ESYS.
 * On error *out is NULL and nothing was created.
 */
SRL_API int srl_open_shared(const char *name, const srl_config *cfg,
                            unsigned flags, srl_limiter **out);

/*
 * ROOM.  A new segment's pages are RAM (tmpfs; an anonymous one's too), all
 * reserved at creation, so a creator (srl_open_shared with SRL_CREATE of a
 * name that does not exist, srl_open_anonymous) first checks that it fits:
 *   - in /dev/shm's free space (named segments only), else SRL_ENOSPC;
 *   - in what the kernel can give: the least of MemAvailable
 *     (/proc/meminfo) and, for each cgroup the caller is in, from its own
 *     up to the root, its memory limit minus its usage (cgroup v2
 *     memory.max - memory.current, v1 memory.limit_in_bytes -
 *     memory.usage_in_bytes), less a margin of 5 %, else SRL_ENOSPC (a
 *     figure that cannot be read is not counted);
 *   - above SRL_SEGMENT_GUARD_BYTES, only with SRL_CONFIG_FORCE, else
 *     SRL_ETOOBIG.
 * Nothing is reserved or created before the check, and a creator that
 * fails or dies at any later point leaves nothing behind either: the
 * segment is built under no name and named once READY.
 *
 * srl_room_check: what that check says now about a new segment of cfg
 * (its capacity, policy, tiers, key_display and flags), changing nothing:
 * 0 if it fits, else SRL_ENOSPC or SRL_ETOOBIG with msg (may be NULL; 512
 * bytes suffice) saying what the segment needs, what is free and what to
 * do, e.g. "the segment needs 22.4 GiB (capacity 400000000 keys); the
 * kernel can give 18.1 GiB (MemAvailable 19.1 GiB, cgroup limit none,
 * margin 5%): lower the capacity, or free memory".  Also SRL_EINVAL and
 * SRL_EPOLICY for a bad cfg.  Bindings call it after a creating open
 * failed with either code, to print the detail.
 */
#define SRL_SEGMENT_GUARD_BYTES (1ull << 30)   /* 1 GiB */
SRL_API int srl_room_check(const srl_config *cfg, char *msg, size_t len);


/* The same table in an anonymous MAP_SHARED mapping: create, then fork.
 * Its room is checked as a named creator's (ROOM), /dev/shm aside. */
SRL_API int srl_open_anonymous(const srl_config *cfg, srl_limiter **out);

/*
 * The in-process store (liburcu).  cfg->capacity bounds the number of keys.
 * Memory: an index of 16 bytes per key of capacity, and a home node per key
 * of capacity (srl_info's slot_bytes each: 64 for one token bucket, GCRA
 * or sliding counter without key_display), both mapped zeroed at open and
 * paid as keys touch them, so toward the whole once keys spread over the
 * table (as a shared segment's is paid at once); plus the nodes of keys
 * that found their homes taken (about 15 % at full capacity) and of
 * deleted keys awaiting their RCU grace period, and 32 bytes per node
 * that a deletion has touched (what its grace period needs).
 */
SRL_API int srl_open_local(const srl_config *cfg, srl_limiter **out);

/*
 * A store in a Redis server, shared by every host that opens the same
 * server and prefix.  uri:
 *     redis://[user:password@]host[:port][/db][?options]   (port 6379)
 *     unix://[user:password@]/path/to/redis.sock[?options]
 *     redis-cluster://[user:password@]host[:port][,host[:port]...][?options]
 *     redis-sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[?options]
 * options, joined by '&': db=N (SELECT), timeout_ms=N (a call's whole time,
 * default cfg->lock_timeout_ms), prefix=P (1..128 bytes, default "srl"),
 * user=U and password=W (AUTH; or in the userinfo, ":password@" without a
 * user; not both), each option at most once.  User, password and prefix may
 * use %XX escapes.  A bad uri is
 * SRL_EINVAL (srl_redis_uri_check says why); a server that refuses the
 * AUTH, or wants one the uri does not give, SRL_EACCES at open.  The
 * keys used are P:cfg (the policy and the clock's epoch), P:stats and
 * P:k:<key>, each key's entry expiring (PEXPIRE) when its state comes to
 * rest.  Decisions are made by a server-side Lua script (EVALSHA) on the
 * server's TIME, so hosts with skewed clocks agree; cfg->ticker is not used.
 *
 * Four rate algorithms (token_bucket, sliding_log, sliding_counter, gcra)
 * with any permits and window (up to SRL_PERMITS_MAX and
 * SRL_WINDOW_MAX_NS), each as a script deciding exactly as the in-process
 * store (srl_refund too), for as long as P:cfg lives; burst= too.
 * fixed_window, concurrency, compounds and penalty=: SRL_ENOTSUP.  Another
 * policy (algorithm, permits or window) stored under the prefix:
 * SRL_EMISMATCH.
 *
 * Open never depends on the server being up: with cfg given, an open that
 * reaches no server (connect refused or failed, or no answer within
 * timeout_ms) returns 0 and a handle whose calls decide from on_full,
 * flagged SRL_DECISION_DEGRADED (SRL_ESYS or SRL_ETIMEDOUT, the connect's
 * code, with the backoff below), until a call reaches the server; that
 * call checks (or creates) P:cfg first, then decides exactly.  A worker
 * (re)started during an outage thus serves and limits again by itself.  A
 * mismatch found then makes that call and every later one SRL_EMISMATCH
 * with on_full's DEGRADED decision (P:cfg is not asked again: reopen),
 * counted in srl_stats_get's full.  A server that answers but refuses
 * (SRL_EACCES, a wrong password), adopting (cfg NULL) and a bad uri still
 * fail at open.
 *
 * A call's whole time is at most timeout_ms: the wait for the handle's
 * mutex (held by another thread's call), connect, every write and read,
 * redirections and their waits; a server that is slow, even one trickling
 * a valid reply byte by byte, makes the call SRL_ETIMEDOUT.  Not bounded:
 * the name lookup of a host name (getaddrinfo, at each connect), and a
 * name with several addresses may wait up to timeout_ms on each; give an
 * IP address or a unix socket where a call must never wait on DNS (threads
 * queued behind such a connect still give up at their own timeout_ms).  A
 * reply is
 * bounded as it arrives (one line or bulk string at most 64 KiB, all its
 * strings at most 8 MiB, at most 524288 array elements, a walk's batch of
 * pipelined replies the same together; srl's replies are far smaller): a
 * larger one is SRL_ESYS with errno EMSGSIZE, one that does
 * not parse SRL_ESYS with errno EPROTO, and the connection is dropped.
 * Every reply field is checked against the policy (four integers, allowed
 * 0 or 1, remaining <= permits, retry_after 0 when allowed, retry_after and
 * reset_after at most twice the policy's longest wait: one window, two for
 * the sliding counter, GCRA's permits * ceil(window / permits)); a reply
 * of another type or range is SRL_ECORRUPT.  Every error of srl_acquire and
 * srl_peek but the caller's own (SRL_EKEY, SRL_ECOST, SRL_EINVAL) and
 * peek's SRL_ENOENT fills *d from on_full flagged SRL_DECISION_DEGRADED
 * (SRL_ETIMEDOUT, SRL_ESYS, SRL_EACCES, SRL_ECORRUPT, SRL_ENOMEM), so a
 * caller that answers every degraded decision as decided never fails a
 * request because of the server.  The next call reconnects, and after a
 * failed connect retries back off (10 ms doubling to 1 s; calls in between
 * fail at once with the same code).  One connection per limiter, shared by
 * threads under a mutex, re-made in a forked child.  srl_stats_get: allowed and denied from P:stats
 * (all hosts), timeouts of this handle, full this handle's decisions by
 * on_full for a late mismatch (above), used 0 (not counted).
 *
 * cfg NULL adopts the policy stored under the prefix (as rlctl does):
 * SRL_ENOENT if none is stored (nothing is created), SRL_ECORRUPT if the
 * stored text is no policy, SRL_ENOTSUP if it is one this store cannot run
 * (a compound, a concurrency limit, a bound above); on_full, lock_timeout_ms and
 * capacity are then srl_config_init's.  srl_info: name is the prefix,
 * key_display SRL_KEY_MAX (the whole key is kept), created_unix_ns the
 * server's clock when P:cfg was made.
 *
 * srl_foreach walks P:k:* with SCAN (COUNT 100 a batch, MATCH with the
 * prefix's glob characters escaped) and peeks each batch's keys in one
 * pipelined round trip; the connection's mutex is held for one batch, never
 * while fn runs, and each batch takes at most timeout_ms (a server that
 * stops answering: SRL_ETIMEDOUT, keys already given to fn stay given).  A
 * walk of one server past 2 * DBSIZE + 1024 SCAN calls (a cursor that
 * never comes back to 0) ends with SRL_ESYS, errno EPROTO.  As SCAN
 * promises: a key present for the whole walk is visited, one created or
 * expired during it may not be, and a key may be visited
 * twice if Redis shrinks its table meanwhile.  Each srl_entry has the key
 * whole (display, display_len = key_len), now (the peek for cost 1); the
 * store keeps no per-key counts or fingerprint, so allowed, denied,
 * last_ns and fingerprint are 0, and at_rest is 0 (a state at rest is
 * deleted, PX being its time to rest).  A value under P:k: the script
 * cannot read (written by hand) is skipped.  srl_evict_idle returns 0
 * (Redis already drops each state when it comes to rest); srl_check:
 * SRL_ENOTSUP.  Built only with hiredis (meson -Dredis=enabled|auto);
 * without it srl_open_redis returns SRL_ENOTSUP.
 *
 * Redis Sentinel (redis-sentinel://, 1..16 sentinels over TCP, port 26379
 * unless given; MASTER 1..127 bytes of [A-Za-z0-9._:-]; credentials and db
 * are the master's, the sentinels are asked without AUTH).  Before each new
 * connection (the first, and after a connection error or a -READONLY
 * reply: a demoted master) the sentinels are asked in turn, from the last
 * that answered, SENTINEL get-master-addr-by-name MASTER, each within a
 * share of timeout_ms; a reply is at most 300 bytes of that exact shape
 * (host 1..255 bytes of [A-Za-z0-9._:-], port 1..65535), else that
 * sentinel is skipped and named in srl_last_error ("sentinels of 'M':
 * HOST:PORT answered '...'").  No sentinel answering is a failed connect
 * (SRL_ESYS or SRL_ETIMEDOUT, the backoff below).  What a failover loses:
 * Redis replicates asynchronously, so the admissions the old master
 * acknowledged and had not yet sent to the replica are unknown to the new
 * master (their keys admit that many again); decisions after it are exact
 * (check_redis_sentinel measures and prints the loss under load).
 *
 * Redis Cluster (redis-cluster://, 1..16 seeds over TCP; db must be 0; a
 * prefix holding '{' or '}' is SRL_EINVAL, as a hash tag there would put
 * every key in one slot).  The slot map comes from CLUSTER SLOTS of any
 * seed or known master; each command goes to the master of its Redis key's
 * hash slot (CRC16, hash tags as Redis: a limiter key holding "{tag}" is
 * placed by its tag), one connection per master, made lazily, re-made
 * after fork, each with its own reconnect backoff.  MOVED updates the slot
 * and refreshes the map on the next call; ASK is followed with ASKING.  A
 * redirection is followed only to a master of the slot map: one naming
 * another host:port refreshes the map from a known node first, and if the
 * map still does not name it the call is SRL_ESYS with errno EPROTO (srl
 * never connects, nor sends AUTH, to a host only a reply named; so an ASK
 * to a new master that serves no slot yet is refused until its first slot
 * is set).  5
 * redirections are followed at once, further ones (masters that disagree
 * for a moment during a reshard) after a wait of 1 ms doubling, all waits
 * of a call within timeout_ms, then SRL_ETIMEDOUT.  Keys: P:cfg (the policy, checked at
 * open; in one slot), P:k:<key> (one Redis key per limiter key, spread
 * over the slots), and per slot in use one hash P:s:{tag} (tag chosen to
 * land in that slot) holding the clock's epoch (copied from P:cfg) and
 * that slot's allowed/denied: a script's two keys, state and slot hash,
 * always share a slot.  srl_stats_get sums every master's P:s:* (SCAN);
 * srl_foreach SCANs every master.  While a slot is being migrated, a call
 * whose state and slot hash are split between the two masters gets
 * TRYAGAIN and retries (1 ms doubling, up to timeout_ms slept, then
 * SRL_ETIMEDOUT with a DEGRADED decision): resharding while running keeps
 * decisions exact, but calls on a slot mid-move may wait.  Replicas are
 * not read (every command goes to a master); after a failover the map is
 * refreshed on the next call (a failed call marks it stale).  Each master decides on its own TIME: keep the cluster's
 * clocks in sync (a slot moved to a master whose clock differs by d sees
 * its keys' times shift by d).  A master down: its keys' calls return
 * SRL_ETIMEDOUT/SRL_ESYS with on_full's DEGRADED decision, the other
 * masters' keys are decided as before.
 */
SRL_API int srl_open_redis(const char *uri, const srl_config *cfg, srl_limiter **out);

/*
 * The fleet's limit on Redis with the host in front: srl_open_redis(uri,
 * cfg) decides, and the host's shared segment shm_name (/dev/shm/NAME,
 * opened as srl_open_shared(shm_name, ..., flags) opens it: same names,
 * flags, owner and mode rules) remembers, per key, "denied by the fleet
 * for cost c until T".  Until T every worker of the host that asks for
 * that key with a cost >= c is answered on the host: denied, remaining 0,
 * retry_after_ns = T - now (reset_after_ns the same, a lower bound),
 * flags SRL_DECISION_LOCAL, without a round trip.  A smaller cost, a key
 * without a ban and any request after T go to Redis.
 *
 *   - T = the host's monotonic time read before the request was sent plus
 *     Redis's retry_after: the ban ends no later than Redis's own denial
 *     (the server decided after the read), so clock skew between hosts
 *     plays no part.  The host only ever denies: every admission is
 *     Redis's, so the fleet never admits more than the limit.  A local
 *     denial is one Redis would give too, except after a refund or a reset
 *     made on another host (which this host does not hear of: it keeps
 *     denying until T, never longer than Redis's retry_after).
 *   - srl_reset_key and srl_refund act on Redis and clear this host's
 *     memory of the key; rlctl reset on the host segment clears it alone.
 *   - Redis slow or down: as srl_open_redis (SRL_ETIMEDOUT or SRL_ESYS,
 *     on_full's answer flagged SRL_DECISION_DEGRADED); bans already
 *     remembered are still answered locally.  With fallback=POLICY in cfg (a
 *     config of srl_config_parse or srl_config_set), a call Redis gives no
 *     answer to (SRL_ETIMEDOUT, SRL_ESYS) is decided instead by POLICY in
 *     the host segment NAME.fallback (made beside NAME, same rules; NAME
 *     at most SRL_NAME_MAX - 9 bytes, else SRL_EINVAL), exactly across the
 *     host's workers: rc 0, flags SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL.
 *     Every call still asks Redis first (with its reconnect backoff), so
 *     Redis decides again from the first call that reaches it; what the
 *     host admitted meanwhile is not told to Redis (over an outage the
 *     fleet admits up to POLICY per host; e.g. the fleet's limit divided by
 *     the number of hosts).  srl_reset_key clears the key there too.  A degraded answer is never
 *     remembered.  A full host table remembers nothing more (those keys
 *     go to Redis each time); a host lock error skips the host.
 *   - srl_stats_get: Redis's counters (allowed, denied: all hosts) plus
 *     local_denied, this host segment's local answers (every worker of the
 *     host), capacity, used, evicted, recovered and timeouts of the host
 *     segment.  srl_info: kind SRL_STORE_TIERED, the policy, on_full and
 *     key_display of the Redis store, name, capacity and the geometry
 *     fields of the host segment.
 *   - srl_peek answers locally likewise, else asks Redis; srl_foreach walks
 *     Redis's keys; srl_evict_idle drops the host's ended bans; srl_check
 *     checks the host segment; srl_enter/srl_leave/srl_key_state:
 *     SRL_ENOTSUP, as on Redis.
 *
 * The host segment is an ordinary segment of policy
 * "gcra:1/3660d,penalty=3660d" (docs/design.md, "The host tier") whose
 * keys are "P:key", P the uri's key prefix (so limiters of two prefixes
 * may share one host segment; a "P:key" longer than SRL_KEY_MAX is its
 * srl_key_fit form), with a display copy of key_display bytes, 64 when
 * cfg's is 0: rlctl list/get/reset on it show a banned key as "P:KEY",
 * denied with its retry_after, and clear a ban.  A host segment made
 * without a display copy is adopted as it is when cfg's key_display is 0.  Two Redis servers
 * (or dbs) with the same prefix must not share a host segment.  cfg: as srl_open_redis (not NULL); capacity, mode,
 * owner_uid, key_display and lock_timeout_ms also make the host segment.
 * Errors: those of srl_open_redis and of srl_open_shared.  Without hiredis:
 * SRL_ENOTSUP.
 */
SRL_API int srl_open_tiered(const char *shm_name, const char *uri, const srl_config *cfg,
                            unsigned flags, srl_limiter **out);

/* 0 if uri is one srl_open_redis accepts, else SRL_EINVAL with why[]
 * (NUL-terminated, truncated to whylen; may be NULL) naming the bad part,
 * e.g. "redis uri: port must be 1..65535, not '99999'".  Parses only: no
 * connection.  Available in every build, with or without hiredis. */
SRL_API int srl_redis_uri_check(const char *uri, char *why, size_t whylen);

/* Unmap and free the handle; the segment itself stays.  NULL is a no-op. */
SRL_API void srl_close(srl_limiter *lim);

/* Remove the segment's name.  Processes that have it open keep using it.
 * Names follow srl_name_check(). */
SRL_API int srl_unlink(const char *name);

/*
 * Decide one request of the given cost for key[0..len).  Returns 0 with *d
 * filled, or:
 *   SRL_EKEY             len == 0 or len > SRL_KEY_MAX
 *   SRL_ECOST            cost == 0 or cost > permits
 *   SRL_ETIMEDOUT        the key's bucket lock was held longer than
 *                        lock_timeout_ms (its owner is alive but stuck)
 *   SRL_ENOTRECOVERABLE  the bucket's lock is permanently unusable
 *   SRL_ENOMEM           local limiter only: no memory for a new key's state
 *   SRL_ECORRUPT         the bucket's lock is not srl's mutex (its type
 *                        word in the segment was overwritten): it is never
 *                        taken, and srl_check names the bucket
 * On SRL_ETIMEDOUT, SRL_ENOTRECOVERABLE and SRL_ECORRUPT *d is still
 * filled, from on_full, with SRL_DECISION_DEGRADED set, so a caller that
 * ignores the error gets the configured fail-open or fail-closed answer;
 * the Redis and tiered stores fill it so on every error but SRL_EKEY,
 * SRL_ECOST and SRL_EINVAL (srl_open_redis).  On other errors *d is
 * untouched.  A full table is not an error: *d comes
 * from on_full with SRL_DECISION_UNTRACKED set.  A handle opened with
 * SRL_CONFIG_DRY_RUN never answers allowed = 0 (see srl_config.flags).
 */
SRL_API int srl_acquire(srl_limiter *lim, const void *key, size_t len,
                        uint32_t cost, srl_decision *d);

/*
 * The one rule for a key of any length, for a caller whose keys come from
 * clients (a header, a query parameter): every binding's middleware uses it,
 * so a long key counts the same in mod_srl, nginx, Python and PHP.
 *   1 <= *len <= SRL_KEY_MAX: returns key itself, *len unchanged.
 *   *len > SRL_KEY_MAX: writes the key's fitted form into buf and returns
 *     buf, *len = SRL_KEY_MAX: the key's first SRL_KEY_MAX - 32 bytes, then
 *     the 32-byte BLAKE2b-256 hash (libsodium's crypto_generichash, no key)
 *     of the whole key.  Two long keys that differ in any byte get two
 *     fitted keys; the same key gets the same fitted key in every process,
 *     host and binding (no seed, no secret).
 *   *len == 0: returns NULL, *len and buf untouched.  An empty key has no
 *     fitted form: the caller decides, and the middlewares do not limit a
 *     request without a key.
 * NULL for key or len (or for buf when it would be written) returns NULL.
 * Thread-safe, no allocation, reads nothing but key.
 */
SRL_API const void *srl_key_fit(const void *key, size_t *len, unsigned char buf[SRL_KEY_MAX]);

/*
 * srl_acquire under tier `tier` (0..srl_info.tier_count-1; see TIERS): a
 * new key is created in that tier, a key of another tier is converted to
 * it first.  cost must be 1..permits of that tier (SRL_ECOST).  Errors as
 * srl_acquire, and SRL_EINVAL for a tier beyond the table.
 */
SRL_API int srl_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                             uint32_t cost, srl_decision *d);

/* The index of the tier called name ("default" is 0), SRL_ENOENT if the
 * limiter has none of that name, SRL_EINVAL for NULL. */
SRL_API int srl_tier_find(srl_limiter *lim, const char *name);

/* Tier i's name and limits into *out: 0, or SRL_EINVAL (NULL, or i not
 * below srl_info.tier_count). */
SRL_API int srl_tier_get(srl_limiter *lim, uint32_t i, srl_tier *out);

/* 0 if name is a valid tier name (1..SRL_TIER_NAME_MAX of [A-Za-z0-9_-]),
 * else SRL_EINVAL. */
SRL_API int srl_tier_name_check(const char *name);

/*
 * srl_acquire, but a request that the policy admits within max_wait_ns is
 * reserved instead of denied: it takes cost permits now for the instant
 * now + d->wait_ns, as srl_state_reserve describes, under the key's lock.
 * The caller sleeps d->wait_ns (or lets srl_acquire_wait do it) and then
 * acts; one that no longer wants to act gives the reservation back with
 * srl_refund(cost).  Across every process and thread reserving on one key,
 * the instants now + wait_ns keep the policy exactly.  max_wait_ns 0 is
 * srl_acquire exactly (every store, every policy).  Returns as srl_acquire,
 * and SRL_EINVAL for max_wait_ns > SRL_WAIT_MAX_NS, SRL_ENOTSUP for
 * max_wait_ns > 0 when a limit cannot wait (sliding_log, sliding_counter,
 * concurrency, a token bucket refilling more than one permit per ns) or on
 * the Redis and tiered stores.  A full table or a lock error decides from
 * on_full, as srl_acquire does, with wait_ns 0.  A dry-run handle
 * (SRL_CONFIG_DRY_RUN) turns a refused reservation as it turns a denial:
 * allowed 1, SRL_DECISION_WOULD_DENY, wait_ns 0, nothing taken.  A
 * reservation is tier 0's, as srl_acquire is (a key of another tier is
 * converted first; there is no srl_reserve_tier yet).
 */
SRL_API int srl_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                        uint64_t max_wait_ns, srl_decision *d);

/*
 * srl_reserve, then sleep d->wait_ns on CLOCK_MONOTONIC before returning
 * (a signal does not cut the sleep short: it resumes until the deadline,
 * and never sleeps longer than d->wait_ns <= max_wait_ns past the
 * reservation).  On return with d->allowed the caller acts at once.  The
 * decision reads the limiter's ticker; the sleep reads CLOCK_MONOTONIC (an
 * injected ticker is trusted to run at that clock's rate).  Returns as
 * srl_reserve, or SRL_ESYS if the sleep fails otherwise (the permits stay
 * reserved: refund them or act at the reserved time).
 */
SRL_API int srl_acquire_wait(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                             uint64_t max_wait_ns, srl_decision *d);

/*
 * In-flight limits (policy "concurrency:N[,max_hold=WINDOW]").
 *
 * srl_enter admits one request of key if fewer than N of that key are in
 * flight: it returns 0 with d->allowed = 1 and *lease filled, or 0 with
 * d->allowed = 0 (d->retry_after_ns: until the oldest unit passes max_hold,
 * else 1 s, a hint) and lease->gen = 0.  srl_leave(lim, lease) gives the
 * unit back: 0, or SRL_ENOENT (left already, or the unit was reclaimed as
 * abandoned), SRL_EINVAL (a lease from another limiter), never a second
 * release.  A lease is a plain value: keep it anywhere, no allocation.
 *
 * Each unit records its holder (pid, process start time, PID namespace),
 * so a holder that dies without leaving is reclaimed without its help: by
 * the next srl_enter that finds the key full (before it would deny), and
 * by srl_evict_idle / rlctl evict.  So a dead holder's unit never causes a
 * denial.  A stopped (SIGSTOP) holder is alive: its units stay, and a holder
 * in another PID namespace is never judged dead.  max_hold: a unit held
 * longer counts as abandoned even if its holder lives.
 *
 * A concurrency limit may be one limit of a compound ("concurrency:4 +
 * token_bucket:100/1m", at most one per compound): srl_enter then admits
 * only if a unit is free and every rate limit admits, and takes a unit and
 * one permit of each rate limit (all or nothing); srl_leave gives back the
 * unit only (the permits were spent: srl_refund is refused).
 *
 * srl_acquire and srl_refund on a limiter with a concurrency limit, and
 * srl_enter/srl_leave on one without, return SRL_ENOTSUP; so do the Redis
 * store's.  The shared, anonymous and local stores hold units.
 * The lease names the key by its fingerprint (wherever the table moves
 * it) and the unit by (entry, gen); srl_leave must be called by the
 * process that entered (the unit records it): another process's srl_leave,
 * or one after the unit was reclaimed, is SRL_ENOENT and releases nothing.
 * A key whose table is full is decided by on_full (SRL_DECISION_UNTRACKED):
 * lease->gen stays 0 even if on_full allows, and srl_leave of that lease
 * is SRL_ENOENT.  Reclaimed units are counted in srl_stats.reclaimed.
 * The holders are read from the segment: a process that can write it
 * (the trust model, docs/design.md) can free a live holder's units or pin
 * them (a holder recorded as pid 1), but cannot make srl signal or trace
 * any process: a holder is only probed, with kill(pid, 0) and a read of
 * /proc/PID/stat.
 * A dry-run handle (SRL_CONFIG_DRY_RUN) admits a would-be refusal without
 * a unit: allowed = 1, SRL_DECISION_WOULD_DENY, lease->gen = 0.
 * Errors of srl_enter: those of srl_acquire; srl_leave: SRL_EINVAL,
 * SRL_ENOENT, SRL_ETIMEDOUT, SRL_ENOTRECOVERABLE, SRL_ECORRUPT.
 */
typedef struct srl_lease {
    uint64_t owner;           /* which open limiter took it */
    uint64_t where[2];        /* the store's name for the key (its fingerprint) */
    uint32_t entry;           /* the holder entry in the key's state */
    uint32_t gen;             /* that entry's generation; 0: no unit held */
    uint64_t reserved;        /* room to grow; zeroed */
} srl_lease;

SRL_API int srl_enter(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                      srl_decision *d);
SRL_API int srl_leave(srl_limiter *lim, srl_lease *lease);

/* Who holds unit i (0..N-1) of a concurrency state (srl_entry.state at
 * srl_limits_state_offset of the concurrency limit): 1 and *out filled, 0
 * if the unit is free, SRL_EINVAL for a NULL argument or a policy that is
 * not a valid concurrency limit.  For rlctl and monitoring. */
typedef struct srl_holder {
    int32_t pid;              /* in the holder's PID namespace */
    uint32_t reserved0;
    uint64_t start;           /* its start time, clock ticks since boot (0: unknown) */
    uint64_t pidns;           /* its PID namespace inode (0: unknown) */
    uint64_t since_ns;        /* ticker time of the admission */
    uint64_t reserved[2];
} srl_holder;

SRL_API int srl_holder_get(const srl_policy *p, const void *state, uint32_t i, srl_holder *out);

/* Whether that holder still runs, judged from the calling process: 1 alive
 * (a stopped process too), 0 certainly exited (no such pid, a zombie, or
 * the pid now names another process: its unit is freed by the next
 * srl_evict_idle or by the next srl_enter that finds the key full), 2
 * cannot be judged from here (another PID namespace), SRL_EINVAL for NULL. */
SRL_API int srl_holder_alive(const srl_holder *h);

/* A copy of key's whole state (srl_info.state_bytes bytes: every limit's
 * slice at srl_limits_state_offset), taken under the key's lock, for tools
 * that show more than a decision (the holders of a concurrency limit:
 * srl_holder_get; each limit of a compound: srl_state_peek on its slice).
 * Returns 0, SRL_ENOENT (not tracked), SRL_ENOBUFS (buflen too small),
 * SRL_EKEY, SRL_EINVAL, a lock error, or SRL_ENOTSUP (Redis). */
SRL_API int srl_key_state(srl_limiter *lim, const void *key, size_t len, void *buf,
                          size_t buflen);

/* The decision a request of cost would get, changing nothing.
 * SRL_ENOENT if the key is not tracked (a new key would be allowed). */
SRL_API int srl_peek(srl_limiter *lim, const void *key, size_t len,
                     uint32_t cost, srl_decision *d);

/*
 * Give back cost permits an admitted request of this key took (the request
 * turned out free: "count only failed logins"), under the key's lock, as
 * srl_state_refund describes.  Returns 0, or SRL_ENOENT (the key is not
 * tracked: nothing to give back), SRL_EKEY, SRL_ECOST (cost 0 or above
 * permits), SRL_EINVAL, SRL_ETIMEDOUT or SRL_ENOTRECOVERABLE (the bucket's
 * lock; nothing was given back).  A refund is not counted in srl_stats and
 * may give back more than the key's requests took if the caller refunds
 * more than it acquired (it still never lifts a state above a fresh one).
 */
SRL_API int srl_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost);
/* (srl_refund of a reservation's cost cancels it: srl_state_reserve.) */

/* Forget one key (it starts fresh).  SRL_ENOENT if it was not tracked. */
SRL_API int srl_reset_key(srl_limiter *lim, const void *key, size_t len);

/* Drop every state that is at rest; returns how many, or a negative error.
 * Takes one bucket lock at a time; workers keep running. */
SRL_API int64_t srl_evict_idle(srl_limiter *lim);

/* ---------------------------------------------------- operator control
 * What an operator sets on one key, kept in the segment while it lives
 * (shared and anonymous stores; SRL_ENOTSUP with a message naming the
 * store on the in-process, Redis and tiered stores for now).  A key not yet
 * tracked is inserted for it (SRL_ENOSPC if the table has no room for it).
 *
 *   exempt   never refused and never evicted (neither by srl_evict_idle
 *            nor to make room); its decisions are counted in
 *            srl_stats.allowed and srl_stats.exempt and change none of its
 *            state, so it is at its policy's state of when it was exempted
 *            again once unexempted.  remaining / limit show what the policy
 *            would say.
 *   banned   (by hand) denied until the ban ends, whatever its policy says,
 *            retry_after_ns = the time left of the ban; kept from eviction
 *            while it lasts.  A ban wins over an exemption.  A ban from a
 *            limit's ",penalty=" lives in the key's state and is told apart
 *            (srl_key_control.flags: SRL_KEY_BANNED for a ban by hand,
 *            SRL_KEY_PENALTY for a penalty's).
 * Each call takes the key's bucket lock once: a decision of another
 * process either comes before it (the old rule) or after (the new one).
 * Returns 0, or SRL_EKEY, SRL_EINVAL, SRL_ENOSPC, SRL_ENOTSUP, a lock error. */
#define SRL_KEY_EXEMPT 0x1u       /* srl_key_control.flags, srl_entry.control */
#define SRL_KEY_BANNED 0x2u       /* banned by hand (srl_key_ban), until ban_left_ns */
#define SRL_KEY_OWN_LIMITS 0x4u   /* decided by its own stored limits */
#define SRL_KEY_PENALTY 0x8u      /* banned by a limit's ",penalty=" now */
#define SRL_BAN_REASON_MAX 59u    /* bytes of a ban's reason kept (longer: SRL_EINVAL) */

typedef struct srl_key_control {
    unsigned flags;           /* SRL_KEY_* */
    uint32_t repeat;          /* offences remembered (escalating penalties) */
    uint64_t ban_left_ns;     /* SRL_KEY_BANNED: time left of the hand ban */
    char reason[SRL_BAN_REASON_MAX + 1]; /* the hand ban's reason, "" if none */
    uint64_t reserved[2];     /* zeroed */
} srl_key_control;

/* on: 1 exempt the key, 0 take the exemption back (0 also when it had none). */
SRL_API int srl_key_exempt(srl_limiter *lim, const void *key, size_t len, int on);
/* Ban the key for for_ns (> 0) from now, with reason (may be NULL or ""; at
 * most SRL_BAN_REASON_MAX bytes, no control characters).  A new ban
 * replaces the key's previous one.  SRL_ENOSPC also when the segment's
 * reason table (64 distinct reasons) is full: ban without a reason then. */
SRL_API int srl_key_ban(srl_limiter *lim, const void *key, size_t len, uint64_t for_ns,
                        const char *reason);
/* Lift the key's hand ban and forget its offences (0 also when it had none;
 * SRL_ENOENT if the key is not tracked).  A ",penalty=" ban is lifted with
 * srl_reset_key. */
SRL_API int srl_key_unban(srl_limiter *lim, const void *key, size_t len);
/* What is set on the key now; SRL_ENOENT if it is not tracked. */
SRL_API int srl_key_control_get(srl_limiter *lim, const void *key, size_t len,
                                srl_key_control *out);

typedef struct srl_stats {
    uint64_t capacity;        /* slots in the table */
    uint64_t used;            /* keys tracked now */
    uint64_t allowed;         /* decisions, all time */
    uint64_t denied;
    uint64_t full;            /* requests decided by on_full: no slot free */
    uint64_t recovered;       /* buckets repaired after a dead lock owner */
    uint64_t reset_slots;     /* states reset to fresh by repair (failed validation) */
    uint64_t evicted;         /* at-rest states reclaimed (evict_idle and inserts) */
    uint64_t timeouts;        /* lock waits that timed out */
    uint64_t reclaimed;       /* in-flight units freed because their holder died
                                 or held them past max_hold */
    uint64_t local_denied;    /* tiered: denials answered by the host segment
                                 (SRL_DECISION_LOCAL), every worker of the host;
                                 0 for every other store */
    uint64_t would_deny;      /* decisions a dry-run handle (SRL_CONFIG_DRY_RUN)
                                 allowed that would have been denied (also in
                                 denied); Redis: this handle's only */
    uint64_t exempt;          /* decisions of exempt keys (srl_key_exempt;
                                 also in allowed) */
} srl_stats;

/* Sum the per-bucket counters (no shared counter exists on the hot path).
 * Shared and anonymous stores: a handle's denial-flood cache (see
 * SRL_CONFIG_FLOOD_CACHE) holds the denials it answered without the lock
 * until one of: that thread's next decision under the lock of the same
 * bucket, srl_stats_get or srl_foreach on any shared or anonymous handle of
 * the same process (each flushes every such handle of the process first),
 * srl_close of the handle.  So within a process the counts are exact
 * whichever handle reads them, and across processes once every process
 * that decided has flushed (closed, or called srl_stats_get); a process killed before that loses its pending ones
 * (at most 65535 per cached key and thread, and at most 1 s of them while
 * it keeps asking).  A denial of a key evicted before the flush is counted
 * in denied, not in the key's own count (srl_foreach). */
SRL_API int srl_stats_get(srl_limiter *lim, srl_stats *out);

typedef enum srl_store_kind {
    SRL_STORE_SHARED = 0, SRL_STORE_ANONYMOUS = 1, SRL_STORE_LOCAL = 2,
    SRL_STORE_REDIS = 3,      /* srl_open_redis; name holds the key prefix */
    SRL_STORE_TIERED = 4      /* srl_open_tiered; name holds the host segment */
} srl_store_kind;

typedef struct srl_info {
    srl_store_kind kind;
    srl_policy policy;
    srl_on_full on_full;
    uint64_t capacity;        /* slots */
    uint32_t key_display;
    uint32_t slots_per_bucket;
    uint64_t buckets;
    uint64_t segment_bytes;   /* 0 for a local limiter */
    uint32_t slot_bytes;
    uint32_t mode;            /* permission bits of the segment */
    uint32_t owner_uid;
    int32_t creator_pid;
    uint64_t created_unix_ns; /* wall-clock time of creation */
    char name[256];           /* segment name, "" if none */
    uint64_t file_bytes;      /* the segment file's size now (0: anonymous or
                                 local); below segment_bytes it was truncated,
                                 and touching the missing part raises SIGBUS */
    srl_limits limits;        /* every limit; `policy` above is limits.limit[0] */
    uint32_t state_bytes;     /* one key's state (all its limits) */
    uint32_t layout_version;  /* segment layout (0: local or Redis) */
    uint32_t tier_count;      /* tiers, 1..SRL_TIERS_MAX (srl_tier_get) */
    uint32_t policy_gen;      /* the policy's generation: 0 at creation, one more
                                 per srl_policy_change (0 for other stores) */
    uint32_t flags;           /* the SRL_CONFIG_* flags this handle works with:
                                 those it was opened with that take effect in
                                 its store (below), no others */
    uint32_t reserved32;      /* zeroed */
    uint64_t reserved[2];     /* room to grow; zeroed */
} srl_info;

/* What the store is, its policy and geometry now.  info.flags says which of
 * the handle's SRL_CONFIG_* flags took effect, so that a caller (a binding,
 * a metrics page, a test) can see a path is on rather than infer it:
 *   SRL_CONFIG_DRY_RUN      every store, when asked;
 *   SRL_CONFIG_FLOOD_CACHE  shared and anonymous stores, when asked;
 *   SRL_CONFIG_LOCKFREE     shared and anonymous: asked, the segment's slots
 *                           16-byte aligned (created with a GCRA limit in some
 *                           tier), the CPU has a 16-byte CAS, not a dry run,
 *                           and not dropped since by a first decision that could not
 *                           pass every bucket lock (SRL_CONFIG_LOCKFREE's
 *                           costs); local: asked,
 *                           and the policy is one GCRA limit with no penalty,
 *                           not a dry run.  Never for Redis or tiered.
 * A flag that took effect may still leave some requests to the locked path
 * (see each flag); a flag asked for and not listed changes nothing. */
SRL_API int srl_info_get(srl_limiter *lim, srl_info *out);

/*
 * Why an open of segment name (e.g. "/api") was refused with SRL_EACCES:
 * an open that failed has no handle, so its detail comes from this call
 * (changes nothing: one stat of the file).  cfg is the config the open was
 * given (may be NULL: owner_uid self, mode 0600).  msg gets one sentence
 * naming the owner, the mode, the caller and the fix, e.g.
 *   "segment /api is owned by www-data (uid 33), mode 0600; this process
 *    runs as nobody (uid 65534), which cannot open it: run as www-data, or
 *    create it owned by the user that uses it (rlctl --owner USER create
 *    ...), or with mode 0660 and a group both share"
 * and likewise for a file the caller could open but srl does not trust
 * (another owner: run as it, or owner=UID) or a mode with group or other
 * write bits above cfg->mode.  Returns 0, SRL_EINVAL (bad name or
 * buffer), or SRL_ENOBUFS (msg truncated, NUL-terminated; 512 bytes
 * suffice).  Bindings call it after SRL_EACCES from a shared-memory open.
 */
SRL_API int srl_open_explain(const char *name, const srl_config *cfg, char *msg, size_t len);

/*
 * What differs between cfg and an existing segment that refused it with
 * SRL_EMISMATCH: open the segment again with SRL_ADOPT, take its srl_info,
 * and call this.  buf gets one sentence per difference, joined by "; ",
 * naming both sides and what to do, e.g.
 *   "policy: the segment has token_bucket:100/1m, this config asks for
 *    gcra:100/1m (use the segment's policy, or change it live, keeping each
 *    key's use: rlctl set-policy, or open with SRL_CHANGE; or another
 *    segment name, or destroy it: its keys start fresh)"
 * and likewise for capacity (in whole buckets: 1000 keys ask for 1008
 * slots), key_display and the number of tiers (a table of as many tiers
 * that differs is not told apart: compare srl_tier_get's).  Returns how many things differ (0: none, the
 * segment would be accepted), or SRL_EINVAL, or SRL_ENOBUFS (buf was
 * truncated, NUL-terminated).  1024 bytes suffice.
 */
SRL_API int srl_mismatch_explain(const srl_config *cfg, const srl_info *segment, char *buf,
                                 size_t len);
/* The same, the way to change live named in binding b's words
 * (srl_binding_word "change"); srl_mismatch_explain is SRL_BINDING_C. */
SRL_API int srl_mismatch_explain_for(const srl_config *cfg, const srl_info *segment,
                                     srl_binding b, char *buf, size_t len);

/*
 * LIVE POLICY CHANGES.  Give an open shared segment a new policy while
 * every process keeps deciding on it.  cfg is the whole new table, as an
 * opener passes it: cfg->limits (or policy) for tier 0 and tiers/tier_count
 * for the others; its capacity, key_display and tier names (and count) must
 * be the segment's, since they shape the slots and the indices callers
 * hold (srl_tier_find): SRL_EMISMATCH otherwise.  A policy whose largest
 * state needs more bytes than the segment's slots hold (srl_info.state_bytes)
 * is SRL_EMISMATCH too: make a bigger segment.  A concurrency limit, in the
 * segment or in cfg, cannot change (SRL_EPOLICY: its units name holders).
 *
 * Every process picks the new policy up on its next decision (it reads one
 * word, the generation, under the bucket lock it takes anyway), and each
 * key's state is converted on its next touch under that lock by the tier
 * conversion rule (TIERS above): same algorithm, the use carried as a
 * count and capped at the new capacity (a key that used 10 of 10 has
 * exactly 10 left when the limit becomes 20; one that used 50 of 100 has
 * none under 10); another algorithm, the key starts fresh.  The bound: a
 * key is admitted at most C0 + the sum over the changes of
 * max(0, C(k) - C(k-1)) (capacities, no refill), i.e. a raise gives at most
 * the difference and a lowering forgets the excess.  A change equal to
 * the current policy does nothing (the generation stays).
 *
 * Changers are serialised by flock on the segment file; a changer killed
 * at any point leaves a consistent segment, with either the old policy or
 * the new.  It first converts every key still on the generation before
 * the current one (a walk of all buckets, one lock at a time), so a large
 * segment takes a while to change; a bucket lock that times out aborts
 * the change with nothing changed (run it again).
 *
 * msg (may be NULL) gets one sentence on any error: what differs, both
 * sides, and what to do ("... rlctl create NEWNAME --policy ..."); 1024
 * bytes suffice.  Returns 1 if this call changed the policy (a new
 * generation), 0 if cfg's policy was the current one already (nothing
 * done: with several processes applying one change, as a server's workers
 * after a restart, exactly one gets 1), or SRL_EINVAL, SRL_EPOLICY, SRL_EMISMATCH,
 * SRL_ECORRUPT (the segment's current policy copy is damaged),
 * SRL_ETIMEDOUT, SRL_ENOMEM, SRL_ESYS, or SRL_ENOTSUP: anonymous segments
 * (no file to serialise changers: make a new one), srl_open_local,
 * srl_open_redis and srl_open_tiered handles.
 *
 * srl_policy_change_tier: the same for one tier (0: the default policy),
 * the rest of the table as it is now; what `rlctl set-policy NAME
 * [TIER=]POLICY` calls.
 */
SRL_API int srl_policy_change(srl_limiter *lim, const srl_config *cfg, char *msg, size_t len);
/* What srl_policy_change(lim, cfg) would answer, changing nothing: 0 if it
 * would take cfg's policy (or it is the current one already), else the same
 * code and message.  For a process that must not change the segment
 * itself, yet must refuse a config now (mod_srl's root parent checks at
 * startup; its children change). */
SRL_API int srl_policy_change_check(srl_limiter *lim, const srl_config *cfg, char *msg,
                                    size_t len);
SRL_API int srl_policy_change_tier(srl_limiter *lim, uint32_t tier, const srl_limits *limits,
                                   char *msg, size_t len);

/* One tracked key, as srl_foreach shows it. */
typedef struct srl_entry {
    const unsigned char *display; /* leading key bytes kept (not NUL-terminated) */
    uint32_t display_len;
    uint32_t key_len;         /* full length of the key; 0 = unknown (no display copy kept) */
    uint8_t fingerprint[16];
    uint64_t allowed;         /* this key's admitted requests, and denied ones (each
                                 saturating: the shared and in-process stores keep
                                 32 bits of each per key, so they stop at 2^32 - 1) */
    uint64_t denied;
    uint64_t last_ns;         /* ticker time of its last admitted request */
    srl_decision now;         /* srl_peek for cost 1 at the time of the visit */
    int at_rest;
    uint32_t inflight;        /* units held now under the concurrency limit (0: none) */
    const void *state;        /* the key's state bytes (srl_info.state_bytes), a
                                 copy valid only during the call: decode each
                                 limit with srl_limits_state_offset and the
                                 srl_state_ calls, or srl_holder_get */
    uint32_t tier;            /* the key's tier (srl_tier_get): state, now and
                                 at_rest are that tier's */
    uint32_t control;         /* SRL_KEY_* set on it (operator control) */
    uint64_t ban_left_ns;     /* SRL_KEY_BANNED: time left of the hand ban */
} srl_entry;

/* Return nonzero to stop the walk. The entry is valid only during the call. */
typedef int (*srl_foreach_fn)(const srl_entry *e, void *ctx);

/*
 * Visit every tracked key, one bucket lock at a time (never the whole
 * table: workers keep running, and keys may come and go during the walk).
 * Returns the number of keys visited, or a negative error.  fn must not call
 * srl on the same limiter.
 */
SRL_API int64_t srl_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx);

/*
 * Verify every invariant of the table (header checksum, file size, bucket
 * mutexes, geometry, tags against
 * fingerprints, each key in one of its candidate buckets, no duplicate
 * keys, every state valid, no pending undo record), one bucket lock at a
 * time.  Each problem is reported to fn (may be NULL) as one line of text.
 * Returns the number of problems found (0: healthy), or a negative error.
 * SRL_ENOTSUP for a local limiter.
 */
typedef void (*srl_report_fn)(void *ctx, const char *problem);
SRL_API int64_t srl_check(srl_limiter *lim, srl_report_fn fn, void *ctx);

/* ------------------------------------------------------ header helpers */

/*
 * Retry-After value: whole seconds, rounded up ("7" for 6.000000001 s);
 * "0" for an allowed decision.  Returns the length written or SRL_ENOBUFS.
 * Here and in srl_format_ratelimit*, a dry run's would-be denial (allowed
 * with SRL_DECISION_WOULD_DENY) is formatted as the denial it stands for.
 */
SRL_API int srl_format_retry_after(const srl_decision *d, char *buf, size_t len);

/* RateLimit-Policy value, e.g. "default";q=100;w=60 (w in seconds, rounded
 * up).  name must be a non-empty token ([A-Za-z0-9_.-]); NULL means "default". */
SRL_API int srl_format_ratelimit_policy(const srl_policy *p, const char *name,
                                        char *buf, size_t len);

/* RateLimit value, e.g. "default";r=42;t=17: r remaining, t seconds (rounded
 * up) until the quota resets (the retry time when denied). */
SRL_API int srl_format_ratelimit(const srl_decision *d, const char *name,
                                 char *buf, size_t len);

/*
 * A compound's RateLimit-Policy value: one item per limit (the draft allows
 * a list), named name for a single limit, else "name.0", "name.1", ...:
 * "default.0";q=10;w=1, "default.1";q=1000;w=86400.  Returns the length
 * written, SRL_EPOLICY, SRL_EINVAL (bad name) or SRL_ENOBUFS.
 */
SRL_API int srl_format_ratelimit_policies(const srl_limits *l, const char *name,
                                          char *buf, size_t len);

/* The RateLimit value for a compound's decision: the binding limit's item
 * (d->binding), named as in srl_format_ratelimit_policies. */
SRL_API int srl_format_ratelimit_binding(const srl_limits *l, const srl_decision *d,
                                         const char *name, char *buf, size_t len);

/* ------------------------------------------------------- address keys */

/* Room for any srl_key_ip / srl_cidr_format text with its NUL
 * ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128" is 43 bytes). */
#define SRL_KEY_IP_MAX 44

/*
 * The key of a client address's prefix: addr is the address as text,
 * "192.0.2.1" or "2001:db8::1" (inet_pton's forms: dotted quad without
 * leading zeros, RFC 4291 IPv6; no zone "%if", no brackets, no port).
 * An IPv4-mapped IPv6 address (::ffff:192.0.2.1) is its IPv4 address.
 * The key is the address with all but the first v4_prefix (0..32) or
 * v6_prefix (0..128) bits zeroed, then "/prefix": "192.0.2.0/24",
 * "2001:db8::/64", "192.0.2.1/32", "0.0.0.0/0".  IPv6 is written in
 * RFC 5952 form (lower case, no leading zeros, the longest run of two or
 * more zero groups as "::", the first on a tie, never dotted), so the same
 * prefix gives the same key in every binding and rlctl shows it readably.
 * Returns the key's length (excluding the NUL), SRL_EINVAL (NULL, an
 * address that does not parse, a prefix out of range) or SRL_ENOBUFS
 * (len <= the length); on error buf is not written.  len >=
 * SRL_KEY_IP_MAX always suffices.
 */
SRL_API int srl_key_ip(const char *addr, unsigned v4_prefix, unsigned v6_prefix,
                       char *buf, size_t len);

/* An address range, for exemptions: parsed once (srl_cidr_parse), matched
 * per request (srl_cidr_match).  Plain data; zero-filled beyond the prefix. */
typedef struct srl_cidr {
    uint8_t family;           /* 4 or 6 */
    uint8_t prefix;           /* 0..32 or 0..128 */
    uint8_t addr[16];         /* network address; IPv4 in addr[0..3] */
} srl_cidr;

/*
 * Parse "10.0.0.0/8", "2001:db8::/32", or a bare address ("::1", a /32 or
 * /128).  The address is read as srl_key_ip reads it; the prefix is 0..32
 * or 0..128 in decimal without leading zeros.  A mapped range
 * "::ffff:10.0.0.0/104" is the IPv4 range 10.0.0.0/8 (prefix 96..128).
 * Host bits set ("10.0.0.1/8") are refused: which range was meant cannot be
 * told.  Returns 0, or SRL_EINVAL with *out unchanged.
 */
SRL_API int srl_cidr_parse(const char *text, srl_cidr *out);

/* 1 if addr (text, as srl_key_ip reads it; mapped IPv6 counts as IPv4) is
 * in c, 0 if not, SRL_EINVAL for a bad address or a malformed c. */
SRL_API int srl_cidr_match(const srl_cidr *c, const char *addr);

/* c as text, "10.0.0.0/8" (the form srl_key_ip writes).  The length,
 * SRL_EINVAL or SRL_ENOBUFS (buf not written); SRL_KEY_IP_MAX suffices. */
SRL_API int srl_cidr_format(const srl_cidr *c, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* SRL_H */
