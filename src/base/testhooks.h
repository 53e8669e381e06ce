/*
 * testhooks.h - every test hook of the library, and the deliberately broken
 * variants ("mutants") the race suites switch on to show they catch them.
 *
 * The hooks and the variants are not in src/: they are patches,
 * tests/mutants/NAME.patch, which the build applies to its copy of the
 * sources for the test library only (src/meson.build: srl_test, compiled
 * with -DSRL_MUTANTS and linked by the suites that need a mutant through
 * srl_mutants_dep; tests/mutants/README).  The shipped libsrl is compiled
 * from src/ as it is: no flag is tested on its hot path and no broken
 * variant is in it (test no_mutants_shipped checks the built libraries
 * with nm for every function this header declares).
 *
 * SRL__MUTANT(flags, bit) is the one way patched code asks "is this mutant
 * on?".  This is the one file of src/ that names SRL_MUTANTS: the two hook
 * points below (SRL__ROOM_SRC, SRL__SHM_PARK_BUILT) are empty in the
 * shipped library.
 */
#ifndef SRL_TESTHOOKS_H
#define SRL_TESTHOOKS_H

#ifdef SRL_MUTANTS
#define SRL__MUTANT(flags, bit) __builtin_expect(((flags) & (bit)) != 0, 0)
#else
#define SRL__MUTANT(flags, bit) 0
#endif

/* The two hook points of segment creation (shm_room.c, shm_segment.c),
 * defined by src/shm/testhooks_shm.c, which only the test copy compiles:
 *   SRL__ROOM_SRC(real)     the files the room check reads: real, or the
 *                           fakes of srl__room_set_test_src;
 *   SRL__SHM_PARK_BUILT(fd) a creator whose segment (fd) is reserved and
 *                           not yet built or named: parks there when
 *                           srl__shm_set_test_park_built armed it. */
#ifdef SRL_MUTANTS
struct srl__room_src;
const struct srl__room_src *srl__room_test_src(const struct srl__room_src *real);
void srl__shm_test_park_built(int fd);
#define SRL__ROOM_SRC(real) srl__room_test_src(real)
#define SRL__SHM_PARK_BUILT(fd) srl__shm_test_park_built(fd)
#else
#define SRL__ROOM_SRC(real) (real)
#define SRL__SHM_PARK_BUILT(fd) ((void)(fd))
#endif

#ifdef SRL_MUTANTS

#include "srl.h"

/* The shared-memory store (srl__shm_open_test, srl__shm_set_test_flags). */
enum {
    SRL__SHM_TEST_NO_READY = 0x1u,      /* creator stops before publishing READY */
    SRL__SHM_TEST_NOLOCK_DECIDE = 0x2u, /* broken: decide an existing key without its lock */
    SRL__SHM_TEST_GET_THEN_PUT = 0x4u,  /* broken: search, unlock, then insert (no both-locks) */
    SRL__SHM_TEST_NOLOCK_REFUND = 0x8u, /* broken: refund an existing key without its lock */
    SRL__SHM_TEST_NOLOCK_ENTER = 0x10u, /* broken: srl_enter on an existing key without its lock */
    /* 0x20u: free. */
    SRL__SHM_TEST_SLOW_LINK = 0x8000u,  /* creator, without the creators' lock, builds its
                                           segment, waits until someone else has made the
                                           name, then links */
    /* Live policy changes (tests/check_shm_live.c). */
    SRL__SHM_TEST_LIVE_NO_CONVERT = 0x40u, /* broken: a slot of the previous generation
                                              keeps its bytes as they are */
    SRL__SHM_TEST_LIVE_FRESH = 0x80u,   /* broken: ... starts fresh (use forgotten) */
    SRL__SHM_TEST_LIVE_STALE = 0x100u,  /* broken: a decision does not re-read policy_gen
                                           once the handle has a view */
    SRL__SHM_TEST_CHANGE_NO_SWEEP = 0x200u, /* broken: the changer skips its sweep */
    SRL__SHM_TEST_CHANGE_DIE = 0x400u,  /* the changer SIGKILLs itself at its n-th
                                           step (srl__shm_set_test_die) */
    /* The lock-free GCRA path (tests/check_shm_lockfree.c).  Each yields
     * between reading a slot and writing it, as a preemption would. */
    SRL__SHM_TEST_LF_STORE = 0x800u,    /* broken: a plain store of the TAT, no CAS */
    SRL__SHM_TEST_LF_NO_SEQ = 0x1000u,  /* broken: the CAS expects the meta word it
                                           finds at commit time (seq ignored) */
    SRL__SHM_TEST_LF_WRITERS_NO_SEQ = 0x2000u, /* broken: locked writers leave seq
                                           alone (freeze and thaw do nothing) */
    SRL__SHM_TEST_LF_DIE_FROZEN = 0x4000u, /* a locked decision SIGKILLs itself with
                                           the slot frozen (seq odd), mid-write */
    /* 0x8000u is SRL__SHM_TEST_SLOW_LINK (above). */
    SRL__SHM_TEST_LF_PARK = 0x10000u,   /* a lock-free admission, once, parks between
                                           its read of {seq, TAT} and its CAS until
                                           told to go (srl__shm_set_test_park) */
    /* The changers' flock across fork (tests/check_shm_live.c, "fork"). */
    SRL__SHM_TEST_CHANGE_PARK = 0x20000u, /* a changer, holding the flock and having read
                                           the generation it replaces, parks until told
                                           to go (srl__shm_set_test_park) */
    SRL__SHM_TEST_CHANGE_SHARED_FD = 0x40000u, /* broken: the changer flocks the handle's
                                           own fd, whose description every process
                                           forked after the open shares (the code before
                                           976668a) */
    SRL__SHM_TEST_LF_PLAIN_COUNTS = 0x80000u, /* broken: locked writers ignore lf_open
                                           (plain counter adds, no freeze fence) while
                                           other handles decide lock-free (layout 8) */
};
/* The n-th step (1-based: each bucket of the sweep, under its lock; then
 * before, in the middle of and after the spare copy; after publishing) at
 * which a changer with SRL__SHM_TEST_CHANGE_DIE dies. */
void srl__shm_set_test_die(srl_limiter *lim, unsigned n);
/* SRL__SHM_TEST_LF_PARK's and SRL__SHM_TEST_CHANGE_PARK's words, in memory
 * the test shares with the parked process: the decider stores 1 to
 * words[0] once it has read the slot and decided, then waits until
 * words[1] is nonzero, then CASes; the changer stores 1 to words[0] once
 * it holds the flock and has read the generation, then waits for words[1]
 * (two minutes at most: then it gives up, SRL_ETIMEDOUT), then changes. */
void srl__shm_set_test_park(srl_limiter *lim, uint32_t *words);
/* Set SRL__SHM_TEST_* on an open shared/anonymous limiter (src/shm/shm_store.c). */
void srl__shm_set_test_flags(srl_limiter *lim, unsigned flags);
/* srl__shm_open with SRL__SHM_TEST_* flags that act during the open
 * (SRL__SHM_TEST_NO_READY); the shipped srl__shm_open takes none. */
int srl__shm_open_test(const char *name, const srl_config *cfg, unsigned flags,
                       unsigned test_flags, srl_limiter **out);

/* Segment creation (src/shm/testhooks_shm.c).  The room check reads fake's
 * files (a NULL member, or guard 0: the real one) until called with NULL.
 * Before the fork of a creator: the next creator of this process (and of
 * its children, which inherit it) that has reserved its segment writes the
 * file's inode number (8 bytes) to report_fd, then waits for a byte (or
 * EOF) on go_fd before it builds the table; once, then disarmed. */
void srl__room_set_test_src(const struct srl__room_src *fake);
void srl__shm_set_test_park_built(int report_fd, int go_fd);

/* The in-process store (src/local/).  Each reintroduces one bug the design
 * closes, so a test can show it catches it. */
#define SRL__LOCAL_BROKEN_NO_LOCK 0x1u       /* decide without the state's lock */
#define SRL__LOCAL_BROKEN_GET_THEN_PUT 0x2u  /* lookup, then insert without the re-search */
#define SRL__LOCAL_BROKEN_NO_DEAD_RETRY 0x4u /* decide on a dead (orphaned) state */
/* Not a bug but an amplifier: yield between finding a state and locking it,
 * as a preemption at the worst moment would.  Widens the eviction race's
 * window so a test can hit it on two cores; the real code must stay exact
 * with it. */
#define SRL__LOCAL_BROKEN_YIELD 0x8u
/* The pool at its bound answers on_full at once instead of waiting for the
 * nodes that await their grace period (the bug of docs/design.md, "The
 * pool bound race"). */
#define SRL__LOCAL_BROKEN_NO_POOL_WAIT 0x10u
/* The lock-free GCRA path (SRL_CONFIG_LOCKFREE, tests/check_local_lockfree.c). */
#define SRL__LOCAL_BROKEN_LF_BLIND_STORE 0x20u /* write the new TAT with a plain store
                                                  (an exchange), not a compare-and-swap */
#define SRL__LOCAL_BROKEN_LF_NO_TOMBSTONE 0x40u /* eviction and reset leave the state
                                                   word as it is (no version): a CAS may
                                                   land on a retired state */
#define SRL__LOCAL_BROKEN_LF_RETIRE_EARLY 0x80u /* a retired state's counts are added to
                                                   the totals when it dies, not after its
                                                   grace period: a late count is lost */
/* An insert reserves its slot before taking the stripe locks, as it once
 * did: threads racing to insert one key hold a slot each, and a table with
 * room answers on_full (docs/design.md, "Slots reserved by racers"). */
#define SRL__LOCAL_BROKEN_RESERVE_EARLY 0x100u
/* Hold (hold != 0) or release, from the same thread, the stripe locks an
 * insert of key takes: inserters of key then wait there.  SRL_EINVAL for a
 * limiter that is not local. */
int srl__local_hold_key_stripes(srl_limiter *lim, const void *key, size_t len, int hold);
/* Set a tracked key's counts (what srl_foreach reports as allowed and
 * denied), which no test could otherwise bring near their 2^32 - 1 limit:
 * the saturation test.  SRL_ENOENT if the key is not tracked, SRL_EINVAL
 * for a limiter that is not local. */
int srl__local_set_counts(srl_limiter *lim, const void *key, size_t len, uint32_t allowed,
                          uint32_t denied);
/* Every insert ignores the key's home windows (an overflow node for every
 * key): decisions stay exact, only the hit's node miss is dependent again
 * (tests/check_local_homes.c must see it). */
#define SRL__LOCAL_BROKEN_NO_HOMES 0x200u
/* The call_rcu callback marks a node FREE before pool_put has put it back,
 * as the first homes did: an insert may take that home meanwhile, and
 * pool_put then frees the new key's node under it. */
#define SRL__LOCAL_BROKEN_FREE_EARLY 0x400u
/* A lock-free admission CASes the word alone, then stores the count it
 * read plus one, apart (a yield between): an admission counted meanwhile
 * is overwritten, as two 8-byte writes would lose it where the one
 * 16-byte CAS cannot (src/local/local_store.h, word_update; x86-64 only). */
#define SRL__LOCAL_BROKEN_LF_SPLIT_COUNT 0x800u
#define SRL__LOCAL_BROKEN_ALL 0xfffu
/* What the lock-free path saw (counted only in the test library): lost
 * compare-and-swaps (and, in the blind-store variant, overwritten writes),
 * deciders that met a tombstone and fell back to the lock, and decisions
 * counted on a state that was retired meanwhile (late counts). */
struct srl__local_lf_counts {
    uint64_t conflicts, tombstones, late;
    uint64_t lost_counts;   /* counts the split-count variant overwrote */
};
int srl__local_lf_counts(srl_limiter *lim, struct srl__local_lf_counts *out);
/* Switch on SRL__LOCAL_BROKEN_* variants (tests/check_local_race.c).  Call
 * before any other thread uses lim.  Returns SRL_EINVAL for a limiter that
 * is not local or unknown flags. */
int srl__local_set_broken(srl_limiter *lim, unsigned flags);
/* The in-process store's live keys, and how many of them sit in a node of
 * their home windows (local_index.c, HOMES).  SRL_EINVAL for a limiter
 * that is not local. */
int srl__local_home_counts(srl_limiter *lim, uint64_t *live, uint64_t *at_home);
/* Park the next thread that reaches a place (where), so that a test can
 * make something happen exactly there:
 *   SRL__LOCAL_PARK_FREE      the call_rcu callback, in the next node it
 *                             frees, after the node's counts have moved
 *                             and before pool_put;
 *   SRL__LOCAL_PARK_LF_COUNT  a lock-free decider, after its CAS (or read)
 *                             of the word and before it counts its
 *                             decision (only where the count is not in the
 *                             CAS: a denial, or any decision without the
 *                             16-byte CAS);
 *   SRL__LOCAL_PARK_LF_CTL    a lock-free decider, having read the node's
 *                             operator word 0 (local_control.c), before its
 *                             CAS of the word.
 * SRL__LOCAL_PARK_ARM arms the place, SRL__LOCAL_PARK_ASK returns 1 while
 * a thread is parked there (else 0), SRL__LOCAL_PARK_RELEASE lets it go
 * on.  SRL_EINVAL for a limiter that is not local, another place or op. */
enum { SRL__LOCAL_PARK_FREE = 0, SRL__LOCAL_PARK_LF_COUNT = 1, SRL__LOCAL_PARK_LF_CTL = 2 };
enum { SRL__LOCAL_PARK_ASK = 0, SRL__LOCAL_PARK_ARM = 1, SRL__LOCAL_PARK_RELEASE = 2 };
int srl__local_park(srl_limiter *lim, int where, int op);

/* The tiered store (src/redis/tiered.c).  Each breaks one rule of its design. */
#define SRL__TIERED_TEST_ANY_COST 0x1u    /* a ban answers every cost, smaller ones too */
#define SRL__TIERED_TEST_RESET_KEEPS 0x2u /* reset and refund leave the host's ban */
#define SRL__TIERED_TEST_LOCAL_ALLOW 0x4u /* after an admission with remaining > 0, admit
                                             the handle's next request on the host */
#define SRL__TIERED_TEST_NO_MEMORY 0x8u   /* Redis's denials are not remembered */
/* Switch them on (SRL_EINVAL for a limiter that is not tiered). */
int srl__tiered_set_test_flags(srl_limiter *lim, unsigned flags);

/* The Redis store (src/redis/redis_store.c).  Pass the limiter's ticker time to
 * the script instead of the server's TIME (on != 0), so a test compares
 * exact decisions with the pure core; drop the fork check (children then
 * share the parent's socket), the broken variant check_redis must catch.
 * SRL_EINVAL for a limiter that is not a Redis one. */
int srl__redis_fixed_time(srl_limiter *lim, int on);
/* The Redis handle inside a tiered one (tests/mutants/tiered.c.patch), or NULL. */
srl_limiter *srl__tiered_redis(srl_limiter *lim);
int srl__redis_broken_no_pid_check(srl_limiter *lim, int on);

#endif /* SRL_MUTANTS */
#endif
