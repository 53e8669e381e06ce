/*
 * srl.h - a host-wide rate limiter for pre-forked servers.
 *
 * srl_acquire() before each request gives a decision: allowed or not, how
 * many remain, how long to wait (Retry-After).  A policy: at most N
 * requests per key per window; a key is any byte string.  Layers: the pure
 * core (srl_state_*: pointer-free states, time passed in, no I/O, lock or
 * allocation); the limiter over a store (srl_open_shared, _anonymous,
 * _local, _redis, _tiered); header helpers.
 *
 * Errors: 0 (or a count) on success, a negative SRL_E* code on failure,
 * and then nothing changed unless the entry says so; after SRL_ESYS errno
 * holds the cause.  Time: monotonic integer ns, read inside the key's lock.
 * Threads: a handle serves any number of threads; shared and anonymous
 * handles stay valid after fork(), a local one does not; srl_close() must
 * not race other calls.  Keys are told apart by a 128-bit keyed
 * fingerprint.  A segment is trusted by whoever maps it: an opener maps
 * only its own euid's or cfg->owner_uid's (docs/design.md, "Trust model").
 * A worker killed holding a bucket lock is repaired by the next locker.
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
 * SRL_ERRNO_MAP(XX): the one list of result codes, XX(name, code, message)
 * in numeric order; it generates the enum, srl_strerror() and
 * srl_err_name().  The values are ABI: never renumbered.
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
    XX(ETIMEDOUT, -16, "timed out: what it waited for (a lock, a creator, a server) did not answer in time")  /* see srl_last_error for which */ \
    XX(ENOTRECOVERABLE, -17, "a bucket lock is not recoverable") \
    XX(ENOTSUP, -18, "operation not supported by this limiter") \
    XX(ESYS, -19, "system or network error")  /* another operating-system error; see errno */ \
    XX(ETOOBIG, -20, "segment larger than the size guard: pass force (SRL_CONFIG_FORCE)")

#define SRL__ERRNO_ENUM(name, code, msg) SRL_##name = (code),
enum { SRL_ERRNO_MAP(SRL__ERRNO_ENUM) };
#undef SRL__ERRNO_ENUM

/* A static English description of code; never NULL, even for unknown codes. */
SRL_API const char *srl_strerror(int code);

/* The code's name as spelled in this header ("SRL_EINVAL" for SRL_EINVAL,
 * "SRL_OK" for 0), static; NULL for a code that is not in SRL_ERRNO_MAP. */
SRL_API const char *srl_err_name(int code);

/* The calling thread's sentence for its last failed Redis, fronted or
 * operator-control call, open included ("connect 127.0.0.1:6390:
 * connection refused"; never a password, non-printable bytes as '?'; ""
 * if none), or any store's SRL_ECOST ("cost 6: 'token_bucket:5/1s' allows
 * 5 at most").  Each such call clears it first: read it right after the
 * failure.  A fronted open refused by its host segment names the segment,
 * or leaves "" for SRL_EACCES (srl_open_explain says why).  At most len - 1
 * bytes and a NUL into buf (NULL with len 0 allowed); returns its length
 * (< 256).  Thread-local. */
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
    uint32_t penalty_max_s;   /* escalating penalty: the longest ban in seconds,
                                 > penalty_ns (0: every ban is penalty_ns) */
    uint64_t penalty_ns;      /* rate limits: a denied key is refused for this
                                 long from the denial (0: none), <= SRL_WINDOW_MAX_NS */
} srl_policy;

/*
 * Parse "ALGO:N/WINDOW" or "N/WINDOW" (token bucket).  ALGO: token_bucket,
 * sliding_log, sliding_counter, gcra, fixed_window (N in a window opened
 * by the first admission).  WINDOW: a whole count and a unit (ns us ms s m
 * h d): "1m", "500ms", "s".  Then, in order: ",burst=B" (token_bucket,
 * gcra: hold up to B, refill N per WINDOW) and ",penalty=WINDOW" (a denial
 * bans the key that long; refused requests do not extend it, a refund does
 * not lift it); ",penalty=MIN..MAX" doubles each ban that starts within
 * MAX of the end of the key's last one, up to MAX (whole seconds).  Or
 * "concurrency:N[,max_hold=WINDOW]" (srl_enter).
 * Returns 0, SRL_EPOLICY or SRL_EINVAL; *out is written only on success.
 */
SRL_API int srl_policy_parse(const char *text, srl_policy *out);

/*
 * Why a policy text was refused: the bad part is text[offset,
 * offset+length) (length 0: something missing at offset); message says
 * what is wrong and how to fix it, e.g. "unknown option 'burts' (did you
 * mean burst?)".
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
#define SRL_DECISION_BAN_STARTED 0x10u /* this denial started a ",penalty=" ban (one per ban) */

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

/* The ticker of a limiter opened without one: the coarse clock when the
 * policy's window/permits is at least 100 times its resolution r (then a
 * decision is the exact one of up to r earlier), else srl_monotonic_ns. */
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

/* Give back cost permits an admitted request took, never above a fresh
 * state (a refund of a reservation's cost cancels it).  Returns 0,
 * SRL_ECOST, SRL_EPOLICY or SRL_EINVAL; on error state is unchanged. */
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
 * srl_state_reserve: take cost permits for the first instant within
 * max_wait_ns at which the request passes; d->wait_ns is the wait before
 * acting (then remaining 0).  Beyond max_wait_ns or banned: denied, nothing
 * taken.  max_wait_ns 0 is srl_state_acquire.  Only token_bucket (permits
 * <= window_ns) and gcra wait: others SRL_ENOTSUP for max_wait_ns > 0;
 * above SRL_WAIT_MAX_NS SRL_EINVAL.  srl_state_refund cancels it.
 */
#define SRL_WAIT_MAX_NS (3600ull * SRL_NS_PER_S) /* the longest reservation, 1 h */
SRL_API int srl_state_reserve(const srl_policy *p, void *state, uint64_t now, uint32_t cost,
                              uint64_t max_wait_ns, srl_decision *d);

/* ------------------------------------------------- compound policies */

/*
 * A compound policy: 1..SRL_LIMITS_MAX limits, all or nothing: admitted
 * only if every limit admits, then cost is taken from each.  Text: limits
 * joined by '+' ("token_bucket:10/1s + token_bucket:1000/1d"); one limit
 * is a compound of one.  A key's state: the limits' states in order, each
 * 8-byte aligned (srl_limits_state_offset).
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

/* srl_state_* over a compound: cost 1..permits of every limit; the
 * decision is the binding limit's (remaining the least, retry_after the
 * largest of the deniers); a denial writes nothing; refund gives back to
 * every limit; at_rest, valid: every limit. */
SRL_API int srl_limits_state_init(const srl_limits *l, void *state, uint64_t now);
SRL_API int srl_limits_state_acquire(const srl_limits *l, void *state, uint64_t now,
                                     uint32_t cost, srl_decision *d);
SRL_API int srl_limits_state_peek(const srl_limits *l, const void *state, uint64_t now,
                                  uint32_t cost, srl_decision *d);
SRL_API int srl_limits_state_refund(const srl_limits *l, void *state, uint64_t now,
                                    uint32_t cost);
/* srl_state_reserve over a compound: all limits or none, at the largest
 * wait; a refund cancels it exactly for the binding limit. */
SRL_API int srl_limits_state_reserve(const srl_limits *l, void *state, uint64_t now,
                                     uint32_t cost, uint64_t max_wait_ns, srl_decision *d);
SRL_API int srl_limits_state_at_rest(const srl_limits *l, const void *state, uint64_t now);
SRL_API int srl_limits_state_valid(const srl_limits *l, const void *state, uint64_t now);

/* -------------------------------------------------------------- limiter */

typedef struct srl_limiter srl_limiter;   /* opaque */

typedef enum srl_on_full {
    SRL_ON_FULL_ALLOW = 0,    /* table full: allow and count it (default) */
    SRL_ON_FULL_DENY = 1,     /* table full: deny and count it */
    SRL_ON_FULL_EVICT = 2     /* table full: the new key takes the slot of the key
                                 that used the least of its limit (see below) */
} srl_on_full;
/* SRL_ON_FULL_EVICT (elsewhere than shared, anonymous, in-process: ALLOW):
 * ties go to the oldest; never an exempt, banned or own-limits key; counted
 * in evicted_active.  Candidates: the key's two buckets, or in-process the
 * 64 live nodes an insert's scan visits (busy ones skipped).  An evicted
 * key starts fresh, every other stays exact; design.md says why it is not
 * the default. */

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

/* srl_config.flags.  SRL_CONFIG_DRY_RUN: the handle never refuses: a
 * decision that would deny is made and counted as one (also in
 * srl_stats.would_deny) but returns allowed = 1 with
 * SRL_DECISION_WOULD_DENY; srl_enter then holds no unit (lease->gen 0). */
#define SRL_CONFIG_DRY_RUN 0x1u

/* SRL_CONFIG_FLOOD_CACHE (shared, anonymous): a thread answers a key it saw
 * denied from its own copy, without the lock, exactly as the lock would;
 * those denials reach srl_stats late (srl_stats_get). */
#define SRL_CONFIG_FLOOD_CACHE 0x2u

/* SRL_CONFIG_LOCKFREE: decide a tracked key's plain srl_acquire under one
 * GCRA limit with a compare-and-swap, no lock (shared: a segment made with
 * a GCRA limit, x86-64; local: a policy of one GCRA limit).  The same
 * answers either way; handles with and without it share a segment; the
 * rest takes the lock.  srl_info.flags says if it took effect. */
#define SRL_CONFIG_LOCKFREE 0x4u

/* SRL_CONFIG_FORCE: create a segment above SRL_SEGMENT_GUARD_BYTES (else
 * SRL_ETOOBIG, a capacity typo guard).  Ignored by openers, other stores. */
#define SRL_CONFIG_FORCE 0x8u

/*
 * TIERS: named policies in one segment.  Tier 0 is cfg's, "default";
 * cfg->tiers[i] is tier i + 1.  Names: 1..SRL_TIER_NAME_MAX of
 * [A-Za-z0-9_-], unique.  No concurrency limit (SRL_EPOLICY).  The table is
 * the segment's (SRL_EMISMATCH).  A key's slot records its tier: srl_acquire
 * is tier 0; srl_peek, srl_refund, srl_key_state use the key's.  A key
 * converted to another tier keeps its use, capped at the new capacity, if
 * the shapes match (else it starts fresh).  Shared, anonymous and Redis
 * stores (its P:cfg holds the table); others refuse them, SRL_ENOTSUP.
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
 * CONFIGURATION TEXT: the one text form of what a limiter is opened with
 * (rlctl create, mod_srl, Python, PHP).
 *
 *   spec   = POLICY *( SPACE NAME "=" VALUE )
 *   e.g.     token_bucket:100/1m capacity=65536 key_display=32 on_full=deny
 *            tier.paid=token_bucket:10000/1m
 *
 * POLICY is a compound text (srl_limits_parse_ex), first, or policy=POLICY.
 * Options, each at most once, names in any case:
 *   capacity=N         keys, 1..SRL_CAPACITY_MAX; k, M, G = 1000s (65536)
 *   key_display=N      bytes, 0..SRL_KEY_DISPLAY_MAX                   (0)
 *   mode=OCTAL         permission bits 0..0777                      (0600)
 *   on_full=allow|deny|evict                                       (allow)
 *   lock_timeout_ms=N  0..UINT32_MAX                                (1000)
 *   owner=UID|self     srl_config.owner_uid                         (self)
 *   dry_run= lockfree= flood_cache= force=   BOOL, SRL_CONFIG_*      (off)
 *   tier.NAME=POLICY   a tier (TIERS), in order, each once
 *   redis=URI          for srl_open_tiered (srl_config_redis)
 *   fallback=POLICY    the host decides by it while Redis is down; needs redis=
 * BOOL: on/off, yes/no, true/false, 1/0; words in any case.  With redis=:
 * no key_display, mode, lockfree, flood_cache; a concurrency limit alone.
 * lockfree=on needs a gcra limit (srl_config_parse only).
 * Errors (SRL_EPOLICY) fill err with the bad part's offset and length in
 * spec (srl_config_set: in "NAME=VALUE") and what is expected.
 * Ownership: tiers and a uri given by srl_config_parse/set are owned by
 * cfg and released by srl_config_free (the open calls copy them); pass
 * srl_config_set a cfg->tiers of NULL or such a block, never the caller's.
 */
#define SRL_CONFIG_URI_MAX 1024u   /* longest redis= uri, bytes */
#define SRL_CONFIG_TEXT_MAX 8192u  /* srl_config_format never needs more */

/* Write the config of spec into *cfg (from srl_config_init's defaults).
 * Returns 0, SRL_EPOLICY (err says where and why; *cfg untouched),
 * SRL_EINVAL (NULL argument) or SRL_ENOMEM.  *cfg is overwritten: free an
 * earlier parse's config first. */
SRL_API int srl_config_parse(srl_config *cfg, const char *spec, srl_policy_error *err);

/*
 * Set one option of *cfg: name as in the grammar ("capacity", "tier.paid",
 * "policy"), value its text ("64k").  A tier given again is refused.
 * Returns as srl_config_parse; on error *cfg is unchanged.
 */
SRL_API int srl_config_set(srl_config *cfg, const char *name, const char *value,
                           srl_policy_error *err);

/* The canonical spec of cfg; srl_config_parse of it gives cfg again.
 * Returns the length, SRL_ENOBUFS (SRL_CONFIG_TEXT_MAX suffices),
 * SRL_EPOLICY or SRL_EINVAL. */
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

/* Segment names: an optional "/", then 1..SRL_NAME_MAX of [A-Za-z0-9._-],
 * not all dots.  srl_name_check: 0 or SRL_EINVAL. */
#define SRL_NAME_MAX 200u
SRL_API int srl_name_check(const char *name);

/*
 * Open /dev/shm/NAME.  Racing creators: one builds it, the others wait.
 * An existing segment must have cfg's policy and capacity (SRL_EMISMATCH),
 * unless SRL_CHANGE (changed live) or SRL_ADOPT / cfg NULL (its own taken).
 * The file must be owned by the euid or cfg->owner_uid, write bits for
 * others within cfg->mode (SRL_EACCES), its header intact.  Errors:
 * SRL_EINVAL, EPOLICY, ENOENT, EEXIST, EMISMATCH, EFOREIGN, EVERSION,
 * ECORRUPT, ESTALE, EACCES, ENOSPC, ETOOBIG, ETIMEDOUT, ENOMEM, ESYS; then
 * *out is NULL and nothing was created.
 */
SRL_API int srl_open_shared(const char *name, const srl_config *cfg,
                            unsigned flags, srl_limiter **out);

/* ROOM: a creator checks that the segment fits /dev/shm and the memory the
 * kernel can give (SRL_ENOSPC), and above the guard wants SRL_CONFIG_FORCE
 * (SRL_ETOOBIG).  srl_room_check: that check for cfg, changing nothing,
 * with msg (512 bytes) naming the need, the room and the fix. */
#define SRL_SEGMENT_GUARD_BYTES (1ull << 30)   /* 1 GiB */
SRL_API int srl_room_check(const srl_config *cfg, char *msg, size_t len);


/* The same table in an anonymous MAP_SHARED mapping: create, then fork.
 * Its room is checked as a named creator's (ROOM), /dev/shm aside. */
SRL_API int srl_open_anonymous(const srl_config *cfg, srl_limiter **out);

/*
 * The in-process store (liburcu).  cfg->capacity bounds the keys.  Memory:
 * about 16 bytes of index and one slot (srl_info.slot_bytes) per key of
 * capacity, mapped at open and paid as keys touch it (docs/design.md).
 */
SRL_API int srl_open_local(const srl_config *cfg, srl_limiter **out);

/*
 * A store in Redis, shared by every host with the same server and prefix.
 *     redis://[user:password@]host[:port][/db][?options]
 *     unix://[user:password@]/path/to/redis.sock[?options]
 *     redis-cluster://[user:password@]host[:port][,host[:port]...][?options]
 *     redis-sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[?options]
 * options ('&'): db=N, timeout_ms=N (a call's whole time), prefix=P,
 * user=U, password=W (%XX escapes; no raw space or control byte).  Bad uri:
 * SRL_EINVAL; refused AUTH: SRL_EACCES.
 * Sentinel: the sentinels (port 26379) name the master before each new
 * connection; a failover loses the admissions not yet replicated.
 * Decided on the server's TIME, as the in-process store decides:
 * token_bucket, sliding_log, sliding_counter, gcra, burst=, compounds of
 * them (all or nothing in one call, binding as in-process), penalty= and
 * srl_reserve, tiers, concurrency:N alone (fixed_window: SRL_ENOTSUP); another stored
 * policy or tier table: SRL_EMISMATCH.  Open needs no server.  Every error but the caller's own
 * fills *d from on_full, flagged SRL_DECISION_DEGRADED.  cfg NULL adopts
 * the stored policy.  No per-key counts; srl_evict_idle 0; srl_check
 * SRL_ENOTSUP; without hiredis SRL_ENOTSUP.  design.md, "The Redis store".
 */
SRL_API int srl_open_redis(const char *uri, const srl_config *cfg, srl_limiter **out);

/* concurrency:N alone on Redis (in a compound SRL_ENOTSUP): as on the host, a unit
 * records its holder (host id, pid, start time) and comes back by srl_leave, at its host's
 * next full srl_enter if its process died, else after its lease time (then abandoned). */
#define SRL_REDIS_LEASE_DEFAULT_NS (60ull * SRL_NS_PER_S) /* lease time without max_hold */
#define SRL_REDIS_LEASES_MAX 65536u /* held per handle (srl_enter past it: SRL_ENOSPC) */

/*
 * Redis decides (srl_open_redis), and the host segment shm_name (as
 * srl_open_shared opens it) answers a key the fleet denied, for a cost at
 * least as large, until that denial ends: denied, SRL_DECISION_LOCAL, no
 * round trip (srl_reserve: if it ends after max_wait).  The host only
 * denies, so the fleet never admits more.  A denial answers its own tier;
 * a move to another tier forgets it (one racing the move: until its end).
 * Reset and refund act on Redis and clear the host's memory.  Concurrency
 * alone: *out is srl_open_redis's, no segment (a compound: SRL_ENOTSUP).
 * srl_key_state: SRL_ENOTSUP.  Errors: srl_open_redis's and srl_open_shared's.
 * fallback=POLICY: a call Redis does not answer is decided by POLICY (every
 * tier) in the segment NAME.fallback (NAME at most SRL_NAME_MAX - 9 bytes),
 * rc 0, SRL_DECISION_DEGRADED | SRL_DECISION_LOCAL.  docs/design.md.
 */
SRL_API int srl_open_fronted(const char *shm_name, const char *uri, const srl_config *cfg,
                             unsigned flags, srl_limiter **out);
/* srl_open_fronted's name before 0.2, the same call; kept until 1.0. */
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
 * Decide one request of cost for key[0..len): 0 with *d filled, or
 * SRL_EKEY, SRL_ECOST, SRL_ETIMEDOUT (bucket lock held past
 * lock_timeout_ms), SRL_ENOTRECOVERABLE, SRL_ECORRUPT (lock unusable),
 * SRL_ENOMEM (local).  After the lock errors *d comes from on_full with
 * SRL_DECISION_DEGRADED; else on error *d is untouched.  A full table
 * decides by on_full (SRL_DECISION_UNTRACKED).
 */
SRL_API int srl_acquire(srl_limiter *lim, const void *key, size_t len,
                        uint32_t cost, srl_decision *d);

/* A key of any length as srl_acquire takes it: itself up to SRL_KEY_MAX,
 * else (written to buf, *len = SRL_KEY_MAX) its first SRL_KEY_MAX - 32
 * bytes and the BLAKE2b-256 of the whole, the same everywhere.  NULL for
 * *len 0 or a NULL argument.  Thread-safe. */
SRL_API const void *srl_key_fit(const void *key, size_t *len, unsigned char buf[SRL_KEY_MAX]);

/*
 * srl_acquire under tier `tier` (0..srl_info.tier_count-1; see TIERS): a
 * new key is created in that tier, a key of another tier is converted to
 * it first.  cost must be 1..permits of that tier (SRL_ECOST).  Errors as
 * srl_acquire, and SRL_EINVAL for a tier beyond the table.
 */
SRL_API int srl_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                             uint32_t cost, srl_decision *d);

/* srl_peek as a request of tier `tier` would find the key (one of another
 * tier converted to it, nothing written); SRL_EINVAL for a tier beyond. */
SRL_API int srl_peek_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
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

/* srl_acquire that reserves (srl_state_reserve) instead of denying a
 * request admitted within max_wait_ns: wait d->wait_ns, then act, or
 * srl_refund it.  Errors as srl_acquire, SRL_EINVAL, SRL_ENOTSUP (a limit
 * that cannot wait).  Tier 0. */
SRL_API int srl_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                        uint64_t max_wait_ns, srl_decision *d);

/* srl_reserve, then sleep d->wait_ns on CLOCK_MONOTONIC (signals do not
 * cut it short).  Returns as srl_reserve, or SRL_ESYS if the sleep failed
 * (the permits stay reserved). */
SRL_API int srl_acquire_wait(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                             uint64_t max_wait_ns, srl_decision *d);

/*
 * In-flight limits.  srl_enter admits a request if fewer than N of the key
 * are in flight (d->allowed 1, *lease filled; else lease->gen 0);
 * srl_leave gives the unit back (0, SRL_ENOENT: left, reclaimed or another
 * process's; SRL_EINVAL: another limiter's).  A dead holder's unit is
 * reclaimed before it could deny; a unit past max_hold is abandoned.  In a
 * compound srl_enter also takes a permit of each rate limit.  srl_acquire
 * with a concurrency limit, srl_enter without: SRL_ENOTSUP.  Redis: see srl_open_redis.
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

/* Give back cost permits an admitted request of key took, under its lock,
 * as srl_state_refund.  Returns 0, SRL_ENOENT (not tracked), SRL_EKEY,
 * SRL_ECOST, SRL_EINVAL or a lock error (nothing given back).  Not counted
 * in srl_stats. */
SRL_API int srl_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost);
/* (srl_refund of a reservation's cost cancels it: srl_state_reserve.) */

/* Forget one key (it starts fresh).  SRL_ENOENT if it was not tracked. */
SRL_API int srl_reset_key(srl_limiter *lim, const void *key, size_t len);

/* Drop every state that is at rest; returns how many, or a negative error.
 * Takes one bucket lock at a time; workers keep running. */
SRL_API int64_t srl_evict_idle(srl_limiter *lim);

/* ---------------------------------------------------- operator control
 * Set by an operator on one key, kept in the segment or the in-process
 * handle (Redis, tiered: SRL_ENOTSUP).  An untracked key is inserted
 * (SRL_ENOSPC if no room).  exempt: never refused nor evicted, counted in
 * srl_stats.allowed and .exempt, its state untouched.  banned: denied until
 * the ban ends, retry_after the time left; a ban wins over an exemption.
 * A limiter with a concurrency limit refuses exempt and ban (SRL_ENOTSUP:
 * srl_enter reads neither).  Each call takes the key's lock once.  Returns 0, SRL_EKEY, SRL_EINVAL,
 * SRL_ENOSPC, SRL_ENOTSUP or a lock error. */
#define SRL_KEY_EXEMPT 0x1u       /* srl_key_control.flags, srl_entry.control */
#define SRL_KEY_BANNED 0x2u       /* banned by hand (srl_key_ban), until ban_left_ns */
#define SRL_KEY_OWN_LIMITS 0x4u   /* decided by its own stored limits */
#define SRL_KEY_PENALTY 0x8u      /* banned by a limit's ",penalty=" now, until penalty_left_ns */
#define SRL_BAN_REASON_MAX 59u    /* bytes of a ban's reason kept (longer: SRL_EINVAL) */

typedef struct srl_key_control {
    unsigned flags;           /* SRL_KEY_* */
    uint32_t repeat;          /* ",penalty=MIN..MAX": bans remembered (the
                                 last lasted MIN << (repeat - 1), at most MAX) */
    uint64_t ban_left_ns;     /* SRL_KEY_BANNED: time left of the hand ban */
    char reason[SRL_BAN_REASON_MAX + 1]; /* the hand ban's reason, "" if none */
    uint64_t penalty_left_ns; /* SRL_KEY_PENALTY: time left of the penalty's ban */
    uint32_t tier;            /* the key's tier (srl_tier_get; 0 on stores without tiers) */
    uint32_t reserved;        /* zeroed */
} srl_key_control;

/* on: 1 exempt the key, 0 take the exemption back (0 also when it had none). */
SRL_API int srl_key_exempt(srl_limiter *lim, const void *key, size_t len, int on);
/* Ban the key for for_ns (> 0) from now, with reason (may be NULL or ""; at
 * most SRL_BAN_REASON_MAX bytes, no control characters).  A new ban
 * replaces the key's previous one.  SRL_ENOSPC also when the reason table
 * (64 distinct reasons per segment or handle) is full: ban without one. */
SRL_API int srl_key_ban(srl_limiter *lim, const void *key, size_t len, uint64_t for_ns,
                        const char *reason);
/* Lift the key's hand ban and its ",penalty=" ban, and forget its offences:
 * its next penalty ban is MIN long (0 also when it had none; SRL_ENOENT if
 * the key is not tracked).  Its algorithms' states are kept. */
SRL_API int srl_key_unban(srl_limiter *lim, const void *key, size_t len);
/* What is set on the key now; SRL_ENOENT if it is not tracked. */
SRL_API int srl_key_control_get(srl_limiter *lim, const void *key, size_t len,
                                srl_key_control *out);

/* Per-key limits (shared, anonymous and non-lock-free in-process stores; else
 * SRL_ENOTSUP).  Stored: the key is decided by limits, whatever tier a call
 * names, until cleared (then the default tier), never evicted.  Per call: one
 * request decided by the caller's limits; a stored set wins.  A change of
 * limits keeps the key's use; exact under races.  At most 256 distinct sets
 * per segment or handle (SRL_ENOSPC); a state over the slots' (in-process:
 * the policy's) or a concurrency limit: SRL_EPOLICY (srl_last_error names the
 * sizes); also SRL_EKEY, SRL_EINVAL, SRL_ECOST, a lock error. */
SRL_API int srl_key_set_limits(srl_limiter *lim, const void *key, size_t len,
                               const srl_limits *limits);
/* 0 also when the key had none; SRL_ENOENT if it is not tracked. */
SRL_API int srl_key_clear_limits(srl_limiter *lim, const void *key, size_t len);
/* The key's stored limits into *out; SRL_ENOENT if it is not tracked or has none. */
SRL_API int srl_key_get_limits(srl_limiter *lim, const void *key, size_t len, srl_limits *out);
SRL_API int srl_acquire_limits(srl_limiter *lim, const void *key, size_t len,
                               const srl_limits *limits, uint32_t cost, srl_decision *d);

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
                                 denied); Redis: every handle's on the prefix */
    uint64_t exempt;          /* decisions of exempt keys (srl_key_exempt;
                                 also in allowed) */
    uint64_t evicted_active;  /* keys not at rest whose slot a new key took
                                 (SRL_ON_FULL_EVICT; also in evicted) */
} srl_stats;

/* Sum the per-bucket counters.  With SRL_CONFIG_FLOOD_CACHE a process's
 * cached denials reach them when it next locks that bucket, calls
 * srl_stats_get or srl_foreach, or closes: exact within a process, late
 * across processes (a killed one loses its pending ones). */
SRL_API int srl_stats_get(srl_limiter *lim, srl_stats *out);

typedef enum srl_store_kind {
    SRL_STORE_SHARED = 0, SRL_STORE_ANONYMOUS = 1, SRL_STORE_LOCAL = 2,
    SRL_STORE_REDIS = 3,      /* srl_open_redis; name holds the key prefix */
    SRL_STORE_FRONTED = 4,    /* srl_open_fronted; name holds the host segment */
    SRL_STORE_TIERED = 4      /* SRL_STORE_FRONTED's name before 0.2, until 1.0 */
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

/* What the store is, its policy and geometry now.  info.flags: the
 * SRL_CONFIG_* flags that took effect on this handle (DRY_RUN when asked;
 * FLOOD_CACHE on shared and anonymous; LOCKFREE where its conditions
 * hold); a flag asked for and not listed changes nothing. */
SRL_API int srl_info_get(srl_limiter *lim, srl_info *out);

/* Why an open of segment name was refused with SRL_EACCES, changing
 * nothing: one sentence naming owner, mode, caller and fix into msg (512
 * bytes suffice; cfg may be NULL).  0, SRL_EINVAL or SRL_ENOBUFS. */
SRL_API int srl_open_explain(const char *name, const srl_config *cfg, char *msg, size_t len);

/* What differs between cfg and a segment that refused it with
 * SRL_EMISMATCH (its srl_info through SRL_ADOPT): one sentence per
 * difference, "; "-joined, with what to do (1024 bytes suffice).  Returns
 * how many differ, SRL_EINVAL or SRL_ENOBUFS. */
SRL_API int srl_mismatch_explain(const srl_config *cfg, const srl_info *segment, char *buf,
                                 size_t len);
/* The same, the way to change live named in binding b's words
 * (srl_binding_word "change"); srl_mismatch_explain is SRL_BINDING_C. */
SRL_API int srl_mismatch_explain_for(const srl_config *cfg, const srl_info *segment,
                                     srl_binding b, char *buf, size_t len);

/*
 * LIVE POLICY CHANGES: give an open shared segment cfg's policy while every
 * process decides on it.  Capacity, key_display and tier names must stay,
 * the states must fit (SRL_EMISMATCH); no concurrency limit (SRL_EPOLICY).
 * Each key converts at its next touch (TIERS rule).  A killed changer
 * leaves the old policy or the new.  msg (1024 bytes) says what to do.
 * Returns 1 changed, 0 already current, or SRL_EINVAL, EPOLICY, EMISMATCH,
 * ECORRUPT, ETIMEDOUT, ENOMEM, ESYS, ENOTSUP (not a named segment).
 * srl_policy_change_tier: one tier.
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
    uint32_t control;         /* SRL_KEY_* set on it (operator control; SRL_KEY_PENALTY:
                                 a penalty ban runs, its time left in now.retry_after_ns) */
    uint64_t ban_left_ns;     /* SRL_KEY_BANNED: time left of the hand ban */
} srl_entry;

/* Return nonzero to stop the walk. The entry is valid only during the call. */
typedef int (*srl_foreach_fn)(const srl_entry *e, void *ctx);

/* Visit every tracked key, one bucket lock at a time (never the whole
 * table: workers keep running, and keys may come and go during the walk).
 * Returns the number of keys visited, or a negative error.  fn must not call
 * srl on the same limiter. */
SRL_API int64_t srl_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx);

/* Verify every invariant of the table, one bucket lock at a time, each
 * problem reported to fn (may be NULL) as a line.  Returns the number of
 * problems (0: healthy) or an error; SRL_ENOTSUP for a local limiter. */
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

/* The key of an address's prefix (addr as inet_pton reads it; mapped IPv6
 * is IPv4): "192.0.2.0/24", "2001:db8::/64" (RFC 5952).  Returns the
 * length, SRL_EINVAL or SRL_ENOBUFS; SRL_KEY_IP_MAX suffices. */
SRL_API int srl_key_ip(const char *addr, unsigned v4_prefix, unsigned v6_prefix,
                       char *buf, size_t len);

/* The text after "ip" in a binding's address key ("/24" or "/24,/64", len
 * bytes): V4 0..32, V6 0..128 (64 when not given).  0, or SRL_EINVAL. */
SRL_API int srl_key_ip_form(const char *text, size_t len, unsigned *v4, unsigned *v6);

/* An address range, for exemptions: parsed once (srl_cidr_parse), matched
 * per request (srl_cidr_match).  Plain data; zero-filled beyond the prefix. */
typedef struct srl_cidr {
    uint8_t family;           /* 4 or 6 */
    uint8_t prefix;           /* 0..32 or 0..128 */
    uint8_t addr[16];         /* network address; IPv4 in addr[0..3] */
} srl_cidr;

/* Parse "10.0.0.0/8", "2001:db8::/32" or a bare address (/32, /128); a
 * mapped range is its IPv4 one; host bits set are refused.  0, or
 * SRL_EINVAL with *out unchanged. */
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
