/*
 * shm.h - the host-wide store: a bucketed table in a shared mapping (internal).
 *
 * One segment = a header page (struct srl__shm_header) followed by `buckets`
 * buckets of SRL__SHM_SLOTS slots each.  The segment holds offsets and
 * sizes only, never pointers, so every process may map it anywhere.  See
 * docs/design.md for the full layout, the lock order and the repair rules.
 *
 * Files:
 *   shm_segment.c  create/open/validate/map a segment (named or anonymous)
 *   shm_room.c     will a new segment fit: /dev/shm, memory, the size guard
 *   shm_lock.c     robust bucket mutexes (init, kind check), deadlines, undo record
 *   shm_table.c    hashing, locking with crash repair, lookup, the decisions,
 *                  insert, relocation, reclaim
 *   shm_slot.c     a slot's rules: lookup in a locked bucket, conversion on
 *                  touch (srl__shm_slot_current), repair's check and reset of
 *                  a slot (its one-line accessors are static inline here)
 *   shm_walk.c     the walks (evict_idle, foreach, table init) and the calls
 *                  on one key that decide nothing (key_state, reset_key,
 *                  tier_get); calls shm_table.c and shm_slot.c, never the
 *                  reverse
 *   shm_check.c    the invariant checker (srl__shm_check)
 *   shm_policy.c   the live policy's two copies and each handle's views
 *   shm_change.c   srl_policy_change on a segment (the changer)
 *   shm_flood.c    the per-handle denial-flood cache (answers a key's repeated
 *                  denials without a lock while the bucket's gen holds)
 *   shm_lockfree.c the lock-free found-key path of GCRA (SRL_CONFIG_LOCKFREE)
 *   shm_store.c    the srl__store_ops over the table, the public openers
 *
 * Trust: the segment is shared with every process that can open it.  Its
 * geometry is copied into the private handle (struct srl__shm) at open and
 * checked against the file size; afterwards only the private copy is used
 * to compute addresses, and every index or length read back from shared
 * memory (tags, undo_slot, key_len) is bounds-checked before use.
 *
 * Read once (the rule every shm_*.c file keeps): whoever can write the
 * segment can write it while a worker runs, lock or no lock, so a word read
 * twice may differ between the reads.  Every word of the segment that is
 * used as an index, a length, a count, an offset, a slot number or a
 * generation (a slot's tier, gen and seq, key_len, tags, undo_slot,
 * moving_slot, policy_gen, lf_open, a bucket's gen) is loaded ONCE into a
 * local (SRL__SHM_ONCE: a relaxed atomic load, which the compiler may
 * neither split nor repeat), the local is validated, and only the local is
 * used from then on; an accessor returns a value, never a pointer to be
 * read again.  An algorithm's state (srl__algo, compound.c) is one value
 * too: the table hands the algorithms a private snapshot of it
 * (srl__shm_state_load, decided on, then srl__shm_state_store), never the
 * mapped bytes, so a decision, a check, a conversion or a walk sees one
 * state however the mapping changes meanwhile; its counts and indices are
 * then judged as the algorithms judge any state (srl__compound_valid, bounded
 * loops), and no assert() anywhere depends on segment bytes.  The copies
 * of the policy are read the same way: one snapshot, then validated
 * (srl__shm_policy_read).  Bytes that are only shown or counted (the
 * display copy, the counters) need no rule: a torn read there is a wrong
 * number, never a wrong address.
 *
 * Concurrency: each bucket is guarded by its own robust, process-shared
 * mutex (bucket head).  Tags may be read without the lock (relaxed atomic
 * loads) as a hint only; every decision re-verifies under the lock.  When two
 * buckets are held they were locked in increasing index order; a third
 * bucket (relocation, check) is only ever taken with trylock or in index
 * order, so no cycle can form.
 */
#ifndef SRL_SHM_H
#define SRL_SHM_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "limiter.h"
#include "testhooks.h"

#define SRL__SHM_MAGIC "SRLSHM\0\1"
#define SRL__SHM_VERSION 8u            /* 3: header checksum, creator identity;
                                           4: compound limits, slot meta word;
                                           5: tier table, a slot's tier, bucket
                                              would_deny, recovered moved to the
                                              header page (srl__shm_live);
                                           6: live policy: two policy copies in
                                              pages 1 and 2, policy_gen, a slot's
                                              generation in its meta word; bucket
                                              gen (the denial-flood cache,
                                              shm_flood.c), bucket full 32 bits
                                              to make its room;
                                           7: a slot's meta flags word is its
                                              sequence (seq), slots 16-aligned
                                              when the creation policy has a
                                              GCRA limit (the lock-free GCRA
                                              path, shm_lockfree.c); counters
                                              and gen updated by atomic adds on
                                              16-aligned segments;
                                           8: lf_open in the header page: those
                                              atomic adds (and the freeze's
                                              fence) only once a lock-free
                                              handle may exist;
                                           9: operator control (issue 41): flags
                                              in the tier word's high byte
                                              (SRL__SLOT_F_*), a 16-byte operator
                                              record per slot after the counters
                                              (hand ban, escalation memory), the
                                              bucket counters exempt and
                                              evicted_active, and the operator
                                              area after the table (per-key
                                              limit sets, ban reasons) */
#define SRL__SHM_SLOTS 16u              /* slots per bucket */
#define SRL__SHM_PAGE_BYTES 4096u       /* the header page (struct srl__shm_header) */
#define SRL__SHM_HEADER_BYTES 12288u    /* header page + the two policy copies; the
                                           table follows (table_offset) */
#define SRL__SHM_HASH_KEY_BYTES 16u     /* SipHash takes a 128-bit key */
#define SRL__SHM_FP_BYTES 16u           /* fingerprint: SipHash-2-4 128-bit output */
/* The bounded wait of an opener for a creator to finish.  Overridable at
 * build time for one build only: the fuzzer's (tests/fuzz/run.sh), where a
 * mutated header that says "a creator is at work" would otherwise cost
 * each such input two seconds, and a long run slows to a few inputs a
 * second once the corpus holds some.  Every shipped build keeps 2000. */
#ifndef SRL__SHM_READY_WAIT_MS
#define SRL__SHM_READY_WAIT_MS 2000u
#endif
#define SRL__SHM_CREATOR_WAIT_MS 30000u /* ... that is still inside create() */

/* header.state */
enum { SRL__SHM_INIT = 1u, SRL__SHM_READY = 2u, SRL__SHM_FAILED = 3u };

/* The segment header.  Written once by the creator before READY; read-only
 * afterwards (state aside), so readers need no lock once READY was seen
 * with acquire ordering. */
struct srl__shm_header {
    char magic[8];
    uint32_t version;
    uint32_t state;              /* INIT -> READY (release), or INIT -> FAILED */
    uint64_t abi;                /* srl__shm_abi_word() of the creator */
    uint64_t buckets;
    uint64_t capacity;           /* buckets * SRL__SHM_SLOTS */
    uint64_t table_offset;       /* == SRL__SHM_HEADER_BYTES */
    uint64_t total_bytes;        /* table_offset + buckets * bucket_bytes */
    uint32_t slots_per_bucket;
    uint32_t bucket_bytes;
    uint32_t slot_bytes;
    uint32_t state_bytes;        /* the compound state: srl__compound's state_bytes */
    uint32_t key_display;
    uint32_t on_full;            /* the creator's choice (informational) */
    uint32_t mode;
    int32_t creator_pid;
    uint64_t created_unix_ns;
    uint8_t hash_key[SRL__SHM_HASH_KEY_BYTES];
    uint64_t creator_start;      /* its start time (proc.h), 0 unknown */
    uint64_t creator_pidns;      /* its PID namespace inode, 0 unknown */
    srl_limits limits;           /* the policy: 1..SRL_LIMITS_MAX limits, canonical
                                    (reserved words zero: srl_limits_validate);
                                    tier 0, "default" */
    uint32_t tier_count;         /* 1..SRL_TIERS_MAX, tier 0 included */
    uint32_t tier_pad;           /* zero */
    srl_tier tiers[SRL_TIERS_MAX - 1]; /* tiers 1..tier_count-1 (canonical limits,
                                    NUL-padded names), then all zero:
                                    srl__tiers_valid */
    uint64_t op_offset;          /* layout 9: the operator area (struct
                                    srl__shm_keylim[keylim_count] then struct
                                    srl__shm_reason[reason_count]), right after
                                    the table: table_offset + buckets *
                                    bucket_bytes; checked against the geometry */
    uint32_t keylim_count;       /* == SRL__SHM_KEYLIMS (checked) */
    uint32_t reason_count;       /* == SRL__SHM_REASONS (checked) */
    uint64_t header_sum;         /* srl__shm_header_sum(), written last before READY */
};

_Static_assert(sizeof(struct srl__shm_header) <= SRL__SHM_HEADER_BYTES, "header fits its page");

/* Rare counters of the whole segment, in the header page after the header
 * (not covered by header_sum: they change after READY).  Written with
 * atomic adds only on paths that are rare by nature (a dead holder's unit
 * reclaimed, a bucket repaired after its lock owner died), never by a plain
 * decision; read as hints (untrusted). */
struct srl__shm_live {
    uint64_t reclaimed;          /* in-flight units of dead or expired holders freed */
    uint64_t recovered;          /* buckets repaired after EOWNERDEAD (layout 5) */
    uint32_t policy_gen;         /* layout 6: the current policy's generation; its
                                    copy is policy_gen & 1 (srl__shm_policy).
                                    Stored with release by a changer only (under
                                    the file's flock), loaded with acquire under a
                                    bucket lock by every decision */
    uint32_t lf_open;            /* layout 8: whether lock-free deciders may exist
                                    (SRL__SHM_LF_*): NONE until a lock-free handle
                                    opens; BIRTH when the creator asked for the path
                                    (before READY: no locked decision ever read
                                    NONE); LATER when a later opener set it, and
                                    then passed every bucket's lock before its
                                    first lock-free decision (srl__shm_lf_open).
                                    Never goes back.  Untrusted: any nonzero is
                                    "may exist", the safe direction; a forged NONE
                                    costs only counts, which whoever can write the
                                    segment can change anyway */
    uint32_t policy_damage;      /* policy generations a decider refused: policy_gen
                                    behind the newest view its handle built (the
                                    word only goes forward), or a new generation
                                    beyond SRL__SHM_POL_VIEWS (shm_policy.c).
                                    Atomic adds; srl_check reports any nonzero */
    uint32_t live_pad;           /* zero */
    uint64_t exempt;             /* layout 9: decisions of exempt keys (also in a
                                    bucket's allowed; srl_stats.exempt).  Here and
                                    not in the bucket head, which would grow past
                                    its cache lines (80 bytes a slot, not 84) */
    uint64_t evicted_active;     /* layout 9: keys not at rest whose slot a new key
                                    took (on_full=evict; also in evicted) */
};
#define SRL__SHM_LF_NONE 0u
#define SRL__SHM_LF_BIRTH 1u
#define SRL__SHM_LF_LATER 2u
/* A lock-free handle's own state (struct srl__shm's lf_pending). */
#define SRL__SHM_LF_READY 0u
#define SRL__SHM_LF_PASS 1u
#define SRL__SHM_LF_FAILED 2u
#define SRL__SHM_LIVE_OFFSET 3584u     /* 2048 in layout 4; 5's tier table needs room */
_Static_assert(sizeof(struct srl__shm_header) <= SRL__SHM_LIVE_OFFSET, "live counters follow the header");
_Static_assert(SRL__SHM_LIVE_OFFSET + sizeof(struct srl__shm_live) <= SRL__SHM_PAGE_BYTES,
               "live counters fit the header page");

/* Layout 6: the current policy, outside header_sum (the header keeps the
 * policy at creation).  Two copies, copy c in header page 1 + c; generation
 * g lives in copy g & 1, so a changer writes the spare one (the previous
 * generation's) and then publishes policy_gen = g + 1.  A copy is untrusted
 * like every byte of the segment: srl__shm_policy_read validates its sum,
 * its generation, its table (srl__tiers_valid) and that its largest state
 * fits the slots (state_bytes) before anything uses it (shm_policy.c). */
struct srl__shm_policy {
    uint32_t gen;                /* the generation this copy holds */
    uint32_t tier_count;         /* 1..SRL_TIERS_MAX, tier 0 included */
    srl_limits limits;           /* tier 0, canonical */
    srl_tier tiers[SRL_TIERS_MAX - 1]; /* as in the header: canonical, zero past count */
    uint64_t sum;                /* FNV-1a 64 over the copy with sum as 0 */
};
_Static_assert(sizeof(struct srl__shm_policy) <= SRL__SHM_PAGE_BYTES, "a policy copy fits a page");
#define SRL__SHM_POLICY_OFFSET(c) (SRL__SHM_PAGE_BYTES * (1u + (c)))
_Static_assert(SRL__SHM_POLICY_OFFSET(1) + SRL__SHM_PAGE_BYTES == SRL__SHM_HEADER_BYTES,
               "two policy pages follow the header page");
_Static_assert(sizeof(((srl_entry *)0)->fingerprint) == SRL__SHM_FP_BYTES,
               "srl_foreach hands out the whole stored fingerprint");

/* Head of every bucket.  Counters are written only under the bucket's lock
 * (timeouts excepted: the waiter that timed out does not hold it, so that
 * one is an atomic add); readers sum them with relaxed loads.  The rare
 * counters are 32 bits, summed into 64: a head that grows by a word can
 * round every bucket up by a cache line (the slot-cost test in
 * tests/check_shm_segment.c catches that).  Rarer counters still live in
 * the header page (struct srl__shm_live). */
struct srl__shm_bucket {
    pthread_mutex_t mu;
    union {                         /* 8-aligned: also read as two words (SWAR scan) */
        uint8_t tags[SRL__SHM_SLOTS];   /* 0 empty, else 8 bits of the fp, nonzero */
        uint64_t tag_words[SRL__SHM_SLOTS / 8];
    };
    uint8_t undo_slot;              /* 0 none, else slot + 1 whose state is in undo */
    uint8_t moving_slot;            /* 0 none, else slot + 1 being relocated out */
    uint8_t pad[2];
    uint32_t would_deny;            /* dry-run handles' would-be denials (also in
                                       denied); the word `recovered` held up to
                                       layout 4 (now in srl__shm_live) */
    uint64_t allowed;
    uint64_t denied;
    uint64_t evicted;
    uint32_t full;                  /* 64 bits up to layout 5; 32 since 6 (room for gen) */
    uint32_t gen;                   /* layout 6: bumped (under the lock) by every write
                                       that can change what a slot of this bucket
                                       decides: admissions, bans, conversions, reset,
                                       refund, eviction, relocation, insert, repair.
                                       The flood cache (shm_flood.c) answers a denial
                                       from a private copy only while it is unchanged.
                                       Untrusted: compared for equality only */
    uint32_t reset_slots;
    uint32_t timeouts;
    /* then: undo copy of one state (state_bytes), then the slots */
};

_Static_assert(SRL__SHM_SLOTS % 8 == 0, "tags are scanned 8 at a time");
_Static_assert(offsetof(struct srl__shm_bucket, tags) == sizeof(pthread_mutex_t),
               "the tag words add no padding after the mutex (the ABI word's head size holds)");

/* Slot layout inside a bucket (offsets from the slot's start), named here
 * once; srl__shm_geometry and every accessor use these:
 *   0   uint8  fp[16]
 *   16  meta: uint16 tier, uint16 seq, uint32 gen  (tier below the
 *       table's tier_count, checked; gen: the policy generation the state
 *       is of, the current one or the one before (layout 6); seq (layout
 *       7): odd while a locked writer changes the slot, see below)
 *   24  state[state_bytes]   the compound state (8-aligned), then counters:
 *   +0  uint32 allowed, uint32 denied  (per key, saturating)
 *   +8  uint16 key_len                 (only if key_display > 0)
 *   +10 display[key_display]           (only if key_display > 0)
 * rounded up to 8 bytes, or to 16 when the creation policy has a GCRA
 * limit in some tier (srl__shm_geometry; slots_off too), so that meta and
 * a GCRA state's TAT, bytes 16..32, can be swapped by one 16-byte
 * compare-and-swap (shm_lockfree.c).  key_len serves rlctl's display
 * alone, so with no display copy it is not stored (srl_entry.key_len reads
 * 0, "unknown").
 * What a slot and a bucket then cost is asserted, not restated here:
 * tests/check_shm_segment.c (a_token_bucket_slot_without_key_display_...).
 *
 * seq (layout 7): every locked writer that changes a slot's fp, tier, gen,
 * tag or state makes seq odd first (srl__shm_slot_current or
 * srl__shm_slot_freeze, then a full fence) and even again last
 * (srl__shm_slot_thaw, release), and it only grows (mod 2^16): an insert or
 * a relocation into a slot keeps the slot's own seq.  The lock-free path
 * reads {meta, TAT} with seq even and commits with one 16-byte CAS that
 * expects that same meta: a writer that came between makes it fail.  Under
 * a bucket lock an odd seq of an occupied slot is damage (its writer would
 * have died holding the lock, and repair makes every seq even): reset and
 * counted like a bad meta word. */
#define SRL__SLOT_FP 0u
#define SRL__SLOT_META 16u
#define SRL__SLOT_META_BYTES 8u
#define SRL__SLOT_TIER SRL__SLOT_META  /* uint16 */
#define SRL__SLOT_SEQ (SRL__SLOT_META + 2u)   /* uint16 (layout 7; "flags", zero, before) */
#define SRL__SLOT_GEN (SRL__SLOT_META + 4u)   /* uint32 (layout 6) */
#define SRL__SLOT_STATE (SRL__SLOT_META + SRL__SLOT_META_BYTES)
#define SRL__CTR_ALLOWED 0u            /* from counters_off */
#define SRL__CTR_DENIED 4u
#define SRL__CTR_BAN_UNTIL 8u          /* layout 9: the operator record, 16 bytes */
#define SRL__CTR_OFFENCE 16u
#define SRL__CTR_REPEAT 20u
#define SRL__CTR_REASON 22u
#define SRL__CTR_OP_PAD 23u
#define SRL__CTR_BYTES 24u
#define SRL__CTR_KEY_LEN 24u           /* key_display > 0 only */
#define SRL__CTR_DISPLAY 26u

/* Layout 9, operator control (issue 41; docs/design.md, "Operator control").
 *
 * Flags: the high byte of the slot's uint16 tier word.  The tier itself is
 * the low byte (SRL__SLOT_TIER_MASK; tiers are < SRL_TIERS_MAX).  A flagged
 * slot's tier word never equals a plain tier, so the lock-free path
 * (shm_lockfree.c compares the whole word with the tier asked for) leaves
 * every flagged key to the locked path at no cost to the others.  The word
 * is loaded once (srl__shm_slot_tierword) and split into its two locals.
 * An unknown flag bit is damage (srl__shm_tier_of): reset and counted like
 * a tier beyond the table, and reported by srl_check.
 *   EXEMPT  never refused, never evicted (idle or by on_full=evict); its
 *           decisions are counted (allowed, exempt) and change no state.
 *   BANNED  a ban by hand: denied while now < the record's ban_until, with
 *           retry_after = ban_until - now, whatever the policy says; past
 *           it the flag is cleared by the next locked user.
 *   OWN     decided by its own limit set: the low byte then names an entry
 *           of the key-limits table (SRL__SHM_KEYLIMS entries), not a tier;
 *           bounds-checked and validated (sum, state fits) before use, a bad
 *           one is damage (the slot goes back to tier 0, counted).
 *   CALL    decided by the limits its last srl_acquire_limits passed: the
 *           low byte names a key-limits entry as with OWN, but the key is
 *           evicted like any other (a plain call converts it back to its
 *           tier).  OWN wins over CALL: never both.
 *
 * The operator record, 16 bytes after the per-key counters (counters_off +
 * 8; so a slot of a token bucket without display costs 72, not 56):
 *   +8   uint64 ban_until  the hand ban's end on the segment's clock (ns);
 *                          meaningful with BANNED only
 *   +16  uint32 offence    zero: kept for a per-key count; a ",penalty="
 *   +20  uint16 repeat     ban and its escalation live in the key's state
 *                          (penalty.c), so they are exact on every store
 *   +22  uint8  reason     0 none, else 1 + an index into the reason table
 *   +23  uint8  pad        zero
 * Each word loaded once, judged (until vs now; reason < SRL__SHM_REASONS,
 * else shown as none), never used as an address unchecked.  The record
 * moves with the slot (relocation copies slot_bytes) and is zeroed by an
 * insert; srl_reset_key and unban zero ban_until, offence and repeat. */
#define SRL__SLOT_TIER_MASK 0x00ffu
#define SRL__SLOT_F_EXEMPT 0x0100u
#define SRL__SLOT_F_BANNED 0x0200u
#define SRL__SLOT_F_OWN 0x0400u
#define SRL__SLOT_F_CALL 0x0800u
/* The low byte names a key-limits entry, not a tier. */
#define SRL__SLOT_F_LIMITS (SRL__SLOT_F_OWN | SRL__SLOT_F_CALL)
#define SRL__SLOT_F_KNOWN \
    (SRL__SLOT_F_EXEMPT | SRL__SLOT_F_BANNED | SRL__SLOT_F_OWN | SRL__SLOT_F_CALL)
_Static_assert(SRL_TIERS_MAX <= 256, "a tier fits the tier word's low byte");

/* The operator area, after the table (header op_offset).  Entries are
 * claimed with a compare-and-swap of state (FREE -> BUSY), filled, sealed
 * (sum) and published (READY, release); a reader takes a READY entry's
 * bytes into a private copy and checks its sum before use, like a policy
 * copy.  Nothing in them is an address: a bad entry is damage, reported by
 * srl_check and treated as absent. */
#define SRL__SHM_KEYLIMS 256u          /* distinct per-key limit sets */
#define SRL__SHM_REASONS 64u           /* distinct ban reasons */
#define SRL__SHM_REASON_TEXT 60u       /* a reason's bytes, NUL-padded */
enum { SRL__OP_FREE = 0u, SRL__OP_BUSY = 1u, SRL__OP_READY = 2u };
struct srl__shm_keylim {
    uint32_t state;                 /* SRL__OP_* */
    uint32_t state_bytes;           /* its compound's state: <= the slots' */
    srl_limits limits;              /* canonical (srl_limits_validate) */
    uint64_t sum;                   /* FNV-1a 64 over the entry with state and sum 0 */
};
struct srl__shm_reason {
    uint32_t state;                 /* SRL__OP_* */
    char text[SRL__SHM_REASON_TEXT];
};
#define SRL__SHM_OP_BYTES \
    (SRL__SHM_KEYLIMS * sizeof(struct srl__shm_keylim) + \
     SRL__SHM_REASONS * sizeof(struct srl__shm_reason))

/* One generation of the policy, resolved for this handle (shm_policy.c):
 * private, immutable once published, freed only at close (other threads of
 * the handle may still read an older one).  tier t's compound is cmp[t]. */
struct srl__shm_pol {
    uint32_t gen;
    uint32_t tier_count;
    srl_tier def[SRL_TIERS_MAX];     /* def[0] is "default", tier 0 */
    struct srl__compound cmp[SRL_TIERS_MAX];
    uint32_t lf_tiers;               /* bit t: tier t's compound takes the
                                        lock-free path (srl__shm_lf_tier) */
    const struct srl__shm_pol *prev; /* gen - 1, or NULL if its copy was gone
                                        (or bad) when this one was built */
    struct srl__shm_pol *next_free;  /* every view of the handle, for close */
};
/* The most views a handle builds (about 7 KB each; s->pol_count): views are
 * freed only at srl_close, and only an honest changer's generations, one
 * per srl_policy_change, should ever be built.  A handle that reaches the
 * bound refuses further generations as damage (SRL_ECORRUPT, counted in
 * policy_damage) until it is reopened. */
#define SRL__SHM_POL_VIEWS 256u

/* The private handle.  Everything used to compute an address lives here,
 * copied from the header once at open. */
struct srl__shm {
    srl_limiter lim;                /* first: the facade's head */
    srl_store_kind kind;
    unsigned char *base;            /* the mapping */
    size_t map_bytes;
    uint64_t buckets;
    uint32_t bucket_bytes;
    uint32_t slot_bytes;
    uint32_t state_bytes;
    uint32_t key_display;
    uint32_t undo_off;              /* offset of the undo state in a bucket */
    uint32_t slots_off;             /* offset of slot 0 in a bucket */
    uint32_t counters_off;          /* offset of slot's allowed/denied */
    uint32_t mode;
    uint32_t owner_uid;
    int fd;                         /* the segment's file, kept to fstat (-1: anonymous) */
    uint64_t header_sum;            /* the header's checksum at open (srl_check) */
    srl_limits created;             /* the header's (validated) limits: a
                                       concurrency limit there is the only
                                       policy ever (shm_policy.c) */
    struct srl__shm_pol *pol;       /* the newest view: atomic load/store */
    struct srl__shm_pol *pols;      /* every view built (next_free), freed at close */
    uint32_t pol_count;             /* how many (pol_mu; at most SRL__SHM_POL_VIEWS) */
    pthread_mutex_t pol_mu;         /* serialises building views (this handle only) */
    pthread_mutex_t change_mu;      /* changers of this handle (its threads share
                                       the fd, so its flock does not exclude them) */
    bool open_change;               /* SRL_CHANGE: the opener changes a policy that differs */
    bool change_pending;            /* ... and it did differ (segment_open changes it) */
    struct srl__compound *keylim_cmp[SRL__SHM_KEYLIMS]; /* key-limits entries resolved
                                       (atomic; shm_keylim.c), freed at close */
    struct srl__shm_flood *flood;   /* the denial-flood cache, NULL when off (shm_flood.c) */
    int mutex_kind;                 /* srl__shm_mutex_own_kind(), at open */
    bool lockfree;                  /* SRL_CONFIG_LOCKFREE and the segment and CPU allow
                                       it (srl__shm_lf_open, shm_lockfree.c) */
    uint8_t lf_pending;             /* SRL__SHM_LF_READY, _PASS (its first lock-free
                                       decision passes every bucket lock first:
                                       lf_open was not BIRTH at open) or _FAILED
                                       (that pass could not have a lock: the locked
                                       path for good); atomic, shm_table.c */
    uint8_t hash_key[SRL__SHM_HASH_KEY_BYTES];
    char name[256];
};

/* Home slots (issue 17, item 1).  Each key has, in each of its two
 * candidate buckets, a window of SRL__SHM_HOME_SLOTS adjacent slots chosen
 * by fingerprint bits that select neither bucket nor tag: fp[1] for b1,
 * fp[9] for b2 (fastrange takes each half's high bits, the tag is fp[0]).
 * An insert takes a free slot of that window when there is one, so for most
 * keys the slot a hit needs is known as soon as the key is hashed, and its
 * lines are prefetched together with both bucket heads: the slot's miss
 * overlaps the tags' instead of following them.  A hint only: nothing is
 * stored, no invariant changes, a key may still sit in any slot of either
 * candidate, and every lookup still goes by tags and fingerprint. */
#define SRL__SHM_HOME_SLOTS 2u
_Static_assert(SRL__SHM_HOME_SLOTS >= 1 && SRL__SHM_HOME_SLOTS <= SRL__SHM_SLOTS,
               "a home window lies inside one bucket");

/* First slot of the home window for fingerprint byte x: in [0, SLOTS - HOME]. */
static inline unsigned srl__shm_home_of(uint8_t x)
{
    return (unsigned)(((unsigned)x * (SRL__SHM_SLOTS - SRL__SHM_HOME_SLOTS + 1)) >> 8);
}

/* A key's identity: 128-bit fingerprint, candidate buckets, tag, and the
 * first slot of its home window in each bucket (srl__shm_home_of). */
struct srl__shm_key {
    uint8_t fp[SRL__SHM_FP_BYTES];
    uint64_t b1, b2;                /* b1 != b2 whenever buckets > 1 */
    uint8_t tag;
    uint8_t home1, home2;           /* home window starts in b1 and in b2 */
};

/* ------------------------------------------------------ shm_segment.c */

uint64_t srl__shm_abi_word(void);
/* Geometry for a config: fills the size fields of s (buckets .. slots_off). */
int srl__shm_geometry(struct srl__shm *s, const srl_config *cfg);
/* Open (and maybe create) a named segment.  ops is the handle's store ops
 * (srl__shm_ops): passed in, so that this file needs nothing of
 * shm_store.c, which calls it.  The test copy adds (tests/mutants)
 * srl__shm_segment_open_test, the same with SRL__SHM_TEST_* open flags. */
int srl__shm_segment_open(const char *name, const srl_config *cfg, unsigned flags,
                          const struct srl__store_ops *ops, srl_limiter **out);
int srl__shm_segment_open_anonymous(const srl_config *cfg, const struct srl__store_ops *ops,
                                    srl_limiter **out);
/* 0 if name is a valid segment name; writes "/name" into buf[256]. */
int srl__shm_name(const char *name, char buf[256]);
void srl__shm_unmap(struct srl__shm *s);
/* FNV-1a 64 over the header with state and header_sum taken as 0: catches a
 * corrupted page (a flipped permits word would otherwise be adopted). */
uint64_t srl__shm_header_sum(const struct srl__shm_header *h);
/* srl_check's header part: checksum and file size; returns problems found. */
int64_t srl__shm_check_header(struct srl__shm *s, srl_report_fn fn, void *ctx);

/* --------------------------------------------------------- shm_room.c */

/* Where the room check reads its figures (the real files; the test copy
 * of the library can redirect them: testhooks.h, SRL__ROOM_SRC). */
struct srl__room_src {
    const char *meminfo;      /* /proc/meminfo */
    const char *proc_cgroup;  /* /proc/self/cgroup */
    const char *cgroup_root;  /* /sys/fs/cgroup (v2 there, v1's memory/ under it) */
    const char *shm_dir;      /* /dev/shm */
    uint64_t guard;           /* SRL_SEGMENT_GUARD_BYTES */
};
/* What a new segment of need bytes meets (UINT64_MAX: unknown, or no limit). */
struct srl__room {
    uint64_t need, guard;
    uint64_t shm_free;        /* /dev/shm's free bytes (named segments only) */
    uint64_t mem_available;   /* MemAvailable */
    uint64_t cg_free, cg_limit, cg_used; /* the tightest cgroup: limit - usage */
    uint64_t can_give;        /* min(mem_available, cg_free) less the margin */
};
void srl__room_read(struct srl__room *r, uint64_t need, int named);
/* The same from the files src names (the fuzz target's way in). */
void srl__room_read_from(struct srl__room *r, uint64_t need, int named,
                         const struct srl__room_src *src);
/* 0, SRL_ENOSPC or SRL_ETOOBIG (srl.h, ROOM) for r, with the sentence in msg. */
int srl__room_verdict(const struct srl__room *r, uint64_t capacity, uint32_t cfg_flags, char *msg,
                      size_t len);
/* Both for a segment of cfg of need bytes (named: in /dev/shm); cfg normalised. */
int srl__room_check(const srl_config *cfg, uint64_t need, int named, char *msg, size_t len);
/* The segment file's size now (0 for an anonymous mapping). */
uint64_t srl__shm_file_bytes(const struct srl__shm *s);

/* ------------------------------------------------------- shm_policy.c */

/* FNV-1a 64 over a policy copy with sum taken as 0. */
uint64_t srl__shm_policy_sum(const struct srl__shm_policy *c);
/* Fill a copy from a resolved table (canonical) and seal it. */
void srl__shm_policy_fill(struct srl__shm_policy *c, uint32_t gen, const srl_limits *limits,
                          const srl_tier *tiers, uint32_t tier_count);
/* Read generation gen's copy from s's mapping (one snapshot) and validate
 * it as untrusted input: sum, gen, table (srl__tiers_valid), every state
 * within state_bytes.  0, or SRL_ECORRUPT with why in msg (may be NULL). */
int srl__shm_policy_read(const struct srl__shm *s, uint32_t gen, struct srl__shm_policy *out,
                         char *msg, size_t len);
/* The view of the generation policy_gen names now.  locked: the caller
 * holds a bucket lock, so the copy cannot be overwritten while it is read
 * (a changer sweeps every bucket before it rewrites a copy); unlocked
 * callers (info) retry a read that raced a changer.  NULL if the copy is
 * not valid (SRL_ECORRUPT) or memory ran out. */
const struct srl__shm_pol *srl__shm_pol_get(struct srl__shm *s, bool locked);
/* The view of generation gen (built if need be), or NULL: its copy is not
 * valid, memory ran out, the handle holds SRL__SHM_POL_VIEWS views, or gen
 * is behind the newest view built (policy_gen went backwards: damage; no
 * older view is built again, and no key's state is judged by one). */
const struct srl__shm_pol *srl__shm_pol_of(struct srl__shm *s, uint32_t gen);
/* How many views s holds (tests: the bound above holds). */
uint32_t srl__shm_pol_count(struct srl__shm *s);
/* The compound of tier t of view p (t < p->tier_count). */
static inline const struct srl__compound *srl__pol_cmp(const struct srl__shm_pol *p, uint32_t t)
{
    return &p->cmp[t];
}
void srl__shm_pol_free(struct srl__shm *s);

/* --------------------------------------------------------- shm_lock.c */

/* An absolute CLOCK_MONOTONIC deadline lock_timeout_ms from now. */
struct timespec srl__shm_deadline(const struct srl__shm *s);
/* A deadline not computed yet: srl__shm_lock fills it in only if it has to
 * wait, so an uncontended lock costs no clock read. */
#define SRL__SHM_NO_DEADLINE ((struct timespec){0, -1})
/* Lock bucket b by the deadline (computed on first need if it is
 * SRL__SHM_NO_DEADLINE; one deadline may serve several locks of one call);
 * repairs the bucket after a dead owner.
 * 0, SRL_ETIMEDOUT (counted), SRL_ENOTRECOVERABLE, or SRL_ECORRUPT if the
 * mutex's kind word is not srl's (then glibc is never called on it). */
int srl__shm_lock(struct srl__shm *s, uint64_t b, struct timespec *deadline);
/* Like srl__shm_lock without waiting: 0, or 1 if busy, or an SRL_E* code
 * (SRL_ECORRUPT for a mutex kind that is not srl's). */
int srl__shm_trylock(struct srl__shm *s, uint64_t b);
void srl__shm_unlock(struct srl__shm *s, uint64_t b);
/* Repair after EOWNERDEAD (called with the lock held, before consistent). */
void srl__shm_repair_bucket(struct srl__shm *s, uint64_t b, uint64_t now);
/* Undo record around an in-place state change (bucket lock held). */
void srl__shm_undo_begin(struct srl__shm *s, uint64_t b, unsigned slot);
void srl__shm_undo_end(struct srl__shm *s, uint64_t b);
/* 0 if bucket b's mutex has the kind word srl__shm_mutex_init writes, else
 * SRL_ECORRUPT (or SRL_ESYS if no local mutex could be made); the word found
 * and the one expected go to *found and *want (either may be NULL).  Takes
 * no lock: glibc aborts on some kinds, so this comes before any lock. */
int srl__shm_mutex_kind_check(const struct srl__shm *s, uint64_t b, unsigned *found,
                              unsigned *want);
/* The kind word srl__shm_mutex_init writes in this process, or -1 (none
 * could be made, or not glibc): the handle keeps it (mutex_kind) so that
 * every lock compares one word with one word, inline. */
int srl__shm_mutex_own_kind(void);
/* Initialise bucket b's mutex (creator only, before READY). */
int srl__shm_mutex_init(pthread_mutex_t *mu);

/* -------------------------------------------------------- shm_table.c */

static inline struct srl__shm_header *srl__shm_hdr(const struct srl__shm *s)
{
    return (struct srl__shm_header *)s->base;
}

static inline struct srl__shm_live *srl__shm_live(const struct srl__shm *s)
{
    return (struct srl__shm_live *)(s->base + SRL__SHM_LIVE_OFFSET);
}

static inline struct srl__shm_bucket *srl__shm_bucket(const struct srl__shm *s, uint64_t b)
{
    return (struct srl__shm_bucket *)(s->base + SRL__SHM_HEADER_BYTES +
                                      (size_t)b * s->bucket_bytes);
}

static inline unsigned char *srl__shm_slot(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (unsigned char *)srl__shm_bucket(s, b) + s->slots_off + (size_t)i * s->slot_bytes;
}

static inline void *srl__shm_slot_state(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return srl__shm_slot(s, b, i) + SRL__SLOT_STATE;
}

static inline uint8_t srl__shm_tag_load(const struct srl__shm_bucket *bk, unsigned i)
{
    return __atomic_load_n(&bk->tags[i], __ATOMIC_ACQUIRE);
}

static inline void srl__shm_tag_store(struct srl__shm_bucket *bk, unsigned i, uint8_t t)
{
    __atomic_store_n(&bk->tags[i], t, __ATOMIC_RELEASE);
}

/* SWAR tag match: the high bit of byte j is set in the result if byte j of
 * the tag word w may equal t.  Every byte equal to t is flagged; a byte just
 * above a true match may be flagged too (the borrow of the subtraction), so
 * the result is exact in "any match at all" and each flagged slot must still
 * be verified (tag and fingerprint) by the caller. */
static inline uint64_t srl__shm_tag_match(uint64_t w, uint8_t t)
{
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t x = w ^ (ones * t);
    return (x - ones) & ~x & (ones << 7);
}

/* The slot index within its word of the lowest flagged byte of a nonzero mask. */
static inline unsigned srl__shm_tag_byte(uint64_t mask)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (unsigned)__builtin_ctzll(mask) / 8;
#else
    return 7u - (unsigned)__builtin_ctzll(mask) / 8;
#endif
}

/* Tag word w of a bucket: a relaxed load (a hint without the lock, exact
 * with it, since tags change only under the lock). */
static inline uint64_t srl__shm_tag_word(const struct srl__shm_bucket *bk, unsigned w)
{
    return __atomic_load_n(&bk->tag_words[w], __ATOMIC_RELAXED);
}

/* One load of a word of the segment (the read-once rule at the top): a
 * relaxed atomic load, so the compiler neither tears nor repeats it. */
#define SRL__SHM_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Relaxed add to a per-bucket counter that only lock holders write; the
 * caller holds the bucket lock. */
#define SRL__SHM_COUNT(field, n) \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)

/* A fence between a slot's seq word and its other words (shm_lockfree.c's
 * reader, srl__shm_slot_freeze's writer).  GCC 12 refuses fences under
 * -fsanitize=thread (-Wtsan: TSan does not model them).  TSan cannot see a
 * segment's races anyway (they are between processes, and it tracks one), and
 * the TSan build runs only the in-process store's suite, so there the warning
 * is silenced for this one statement; every other build gets the plain fence. */
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define SRL__SHM_FENCE(order)                                                              \
    do {                                                                                   \
        _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wtsan\"")        \
        __atomic_thread_fence(order);                                                      \
        _Pragma("GCC diagnostic pop")                                                      \
    } while (0)
#else
#define SRL__SHM_FENCE(order) __atomic_thread_fence(order)
#endif

/* The segment's slots are 16-aligned (srl__shm_geometry: a GCRA limit in
 * the creation policy), so lock-free deciders may exist (shm_lockfree.c). */
static inline bool srl__shm_lf_seg(const struct srl__shm *s)
{
    return ((s->slot_bytes | s->slots_off) & 15u) == 0;
}

/* Whether lock-free deciders may be at work now on a bucket whose lock the
 * caller holds (or are the caller: s->lockfree): a 16-aligned segment whose
 * lf_open is set.  A locked writer that reads NONE under the bucket lock
 * runs before any lock-free decision on that bucket (a lock-free opener
 * sets lf_open, then takes and drops every bucket's lock before its first
 * decision: srl__shm_lf_open), so its plain adds and its fence-less freeze
 * cannot race one.  A relaxed load suffices: the opener's store happens
 * before its unlock of the bucket, which happens before our lock.  The
 * line is written once per segment lifetime at most, so reading it on
 * every decision does not bounce. */
static inline bool srl__shm_lf_live(const struct srl__shm *s)
{
    return srl__shm_lf_seg(s) &&
           (s->lockfree ||
            __atomic_load_n(&srl__shm_live(s)->lf_open, __ATOMIC_RELAXED) != SRL__SHM_LF_NONE);
}

/* Add to a counter the lock-free path also adds to (bucket allowed, denied,
 * gen): an atomic read-modify-write where lock-free deciders may be at work
 * (srl__shm_lf_live: a locked load-then-store could lose their add), the
 * plain relaxed load and store elsewhere (layout 6's cost). */
#define SRL__SHM_SHARED_ADD(s, field, n)                                                 \
    do {                                                                                 \
        if (srl__shm_lf_live(s))                                                         \
            __atomic_fetch_add(&(field), (n), __ATOMIC_RELAXED);                          \
        else                                                                             \
            SRL__SHM_PLAIN_ADD(s, field, n);                                             \
    } while (0)

/* A counter add that is a relaxed load and a relaxed store (the caller
 * holds the bucket lock and no lock-free decider adds to it). */
#define SRL__SHM_PLAIN_ADD(s, field, n)                                                  \
    do {                                                                                 \
        __typeof__(field) srl__v = __atomic_load_n(&(field), __ATOMIC_RELAXED);          \
        __atomic_store_n(&(field), srl__v + (n), __ATOMIC_RELAXED);                      \
    } while (0)

/* Per-key counter add, saturating: atomic where the lock-free path may add
 * to it too (without the lock), plain elsewhere (the caller holds the lock). */
static inline void srl__shm_sat_add32(const struct srl__shm *s, uint32_t *p, uint32_t n)
{
    uint32_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
    if (!srl__shm_lf_live(s)) {   /* no lock-free adder: the lock holder's plain add */
        __atomic_store_n(p, v > UINT32_MAX - n ? UINT32_MAX : v + n, __ATOMIC_RELAXED);
        return;
    }
    uint32_t w;
    do
        w = v > UINT32_MAX - n ? UINT32_MAX : v + n;
    while (w != v && !__atomic_compare_exchange_n(p, &v, w, true, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED));
}

/* Hash a key into k, and start the misses a hit needs (both bucket heads,
 * both home windows) so that they overlap: srl__shm_hash_only, then
 * srl__shm_prefetch. */
void srl__shm_hash(const struct srl__shm *s, const void *key, size_t len,
                   struct srl__shm_key *k);
/* Hash a key into k, touching nothing of the table. */
void srl__shm_hash_only(const struct srl__shm *s, const void *key, size_t len,
                        struct srl__shm_key *k);
/* Fetch the lines a locked or lock-free hit on k writes, for writing
 * (src/base/prefetch.h).  Only for a request that goes to the table: a write
 * prefetch takes the line from every other core's cache, so the flood
 * cache's answers, which only read the bucket's gen, do not call it. */
void srl__shm_prefetch(const struct srl__shm *s, const struct srl__shm_key *k);
/* k's buckets, tag and home windows from k->fp (no prefetch). */
void srl__shm_key_of_fp(const struct srl__shm *s, struct srl__shm_key *k);
/* The home window start of a stored fingerprint in bucket b (one of its
 * candidates). */
unsigned srl__shm_fp_home(const struct srl__shm *s, const uint8_t fp[SRL__SHM_FP_BYTES],
                          uint64_t b);

/* Little-endian 64-bit word at p: one load (a byte loop cost ~30
 * instructions per half of every key's hash). */
static inline uint64_t srl__shm_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t srl__shm_fastrange(uint64_t x, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

/* The candidate buckets of a stored fingerprint, and its tag (the rules
 * at the top of shm_table.c).  Inline: the hash inlines them on every
 * request, and shm_slot.c's identity checks use them without calling the
 * table back. */
static inline void srl__shm_fp_buckets(const struct srl__shm *s,
                                       const uint8_t fp[SRL__SHM_FP_BYTES], uint64_t *b1,
                                       uint64_t *b2)
{
    *b1 = srl__shm_fastrange(srl__shm_le64(fp), s->buckets);
    *b2 = srl__shm_fastrange(srl__shm_le64(fp + 8), s->buckets);
    if (*b1 == *b2 && s->buckets > 1)
        *b2 = (*b1 + 1) % s->buckets;
}

static inline uint8_t srl__shm_fp_tag(const uint8_t fp[SRL__SHM_FP_BYTES])
{
    return fp[0] != 0 ? fp[0] : 1;
}

/* --------------------------------------------------------- shm_slot.c */

/* A slot's words (the slot layout above), lock held.  Static inline: the
 * decision path (shm_table.c) reads or writes them on every request, and a
 * call into shm_slot.c there would cost a call per decision. */
static inline uint32_t *srl__shm_slot_allowed(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint32_t *)(srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_ALLOWED);
}

static inline uint32_t *srl__shm_slot_denied(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint32_t *)(srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_DENIED);
}

/* key_len and the display copy exist only when key_display > 0; without
 * them a slot ends after its counters.  Callers check key_display first. */
static inline uint16_t *srl__shm_slot_key_len(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint16_t *)(srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_KEY_LEN);
}

static inline unsigned char *srl__shm_slot_display(const struct srl__shm *s, uint64_t b,
                                                   unsigned i)
{
    return srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_DISPLAY;
}

/* The slot's tier and generation words, each loaded once (the read-once
 * rule at the top): the caller keeps the value in a local, judges it there
 * (a tier below the view's tier_count, a generation the current one or the
 * one before) and indexes with that local only.  Lock held. */
static inline uint16_t srl__shm_slot_tierword(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return SRL__SHM_ONCE(*(const uint16_t *)(srl__shm_slot(s, b, i) + SRL__SLOT_TIER));
}

/* The tier alone (the word's low byte; layout 9's flags are the high
 * byte).  A word with an unknown flag bit is damage: its tier reads as
 * SRL_TIERS_MAX, beyond every table, so every user resets it as it resets
 * a tier out of range (counted in reset_slots). */
static inline unsigned srl__shm_tier_of(unsigned w)
{
    return (w & ~(SRL__SLOT_TIER_MASK | SRL__SLOT_F_KNOWN)) ? SRL_TIERS_MAX
                                                            : (w & SRL__SLOT_TIER_MASK);
}

static inline uint16_t srl__shm_slot_tier(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint16_t)srl__shm_tier_of(srl__shm_slot_tierword(s, b, i));
}

/* Write the tier word from its two parts (lock held, slot frozen). */
static inline void srl__shm_slot_tier_set(struct srl__shm *s, uint64_t b, unsigned i,
                                          unsigned tier, unsigned flags)
{
    uint16_t w = (uint16_t)((tier & SRL__SLOT_TIER_MASK) | (flags & ~SRL__SLOT_TIER_MASK));
    __atomic_store_n((uint16_t *)(srl__shm_slot(s, b, i) + SRL__SLOT_TIER), w, __ATOMIC_RELAXED);
}

/* The operator record's words (layout 9, shm.h above): pointers for the
 * lock holder's stores; readers load each once with SRL__SHM_ONCE. */
static inline uint64_t *srl__shm_slot_ban_until(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint64_t *)(srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_BAN_UNTIL);
}

static inline uint32_t *srl__shm_slot_offence(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint32_t *)(srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_OFFENCE);
}

static inline uint16_t *srl__shm_slot_repeat(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint16_t *)(srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_REPEAT);
}

static inline uint8_t *srl__shm_slot_reason(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return srl__shm_slot(s, b, i) + s->counters_off + SRL__CTR_REASON;
}

static inline uint32_t srl__shm_slot_gen(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return SRL__SHM_ONCE(*(const uint32_t *)(srl__shm_slot(s, b, i) + SRL__SLOT_GEN));
}

/* Whether slot i is kept whatever its state (layout 9): exempt, banned by
 * hand until after now, or decided by its own limits.  Neither srl_evict_idle
 * nor an insert's reclaim nor on_full=evict takes it.  Each word loaded
 * once (the flags, then ban_until only if BANNED).  Lock held. */
static inline bool srl__shm_slot_kept(const struct srl__shm *s, uint64_t b, unsigned i,
                                      uint64_t now)
{
    unsigned f = srl__shm_slot_tierword(s, b, i);
    if (f & (SRL__SLOT_F_EXEMPT | SRL__SLOT_F_OWN))
        return true;
    return (f & SRL__SLOT_F_BANNED) && SRL__SHM_ONCE(*srl__shm_slot_ban_until(s, b, i)) > now;
}

/* A private snapshot of slot i's state (state_bytes into buf, 8-aligned),
 * and its store back: the algorithms decide on the snapshot (the read-once
 * rule at the top).  Lock held. */
static inline void srl__shm_state_load(const struct srl__shm *s, uint64_t b, unsigned i, void *buf)
{
    memcpy(buf, srl__shm_slot_state(s, b, i), s->state_bytes);
}

static inline void srl__shm_state_store(const struct srl__shm *s, uint64_t b, unsigned i,
                                        const void *buf)
{
    memcpy(srl__shm_slot_state(s, b, i), buf, s->state_bytes);
}

static inline uint16_t *srl__shm_slot_seq(const struct srl__shm *s, uint64_t b, unsigned i)
{
    return (uint16_t *)(srl__shm_slot(s, b, i) + SRL__SLOT_SEQ);
}

/* seq (layout 7, lock held): freeze makes it odd (returns true if it was
 * odd already: damage, or a caller's second freeze), followed by a full
 * fence so that no lock-free CAS can land after the state is read; thaw
 * makes it even (release), one past. */
static inline bool srl__shm_slot_freeze(struct srl__shm *s, uint64_t b, unsigned i)
{
    uint16_t *q = srl__shm_slot_seq(s, b, i);
    uint16_t v = __atomic_load_n(q, __ATOMIC_RELAXED);
    if (!(v & 1u))
        __atomic_store_n(q, (uint16_t)(v + 1u), __ATOMIC_RELAXED);
    /* The odd seq is visible before anything of the slot is read: a CAS
     * ordered after this store sees it odd and fails, one ordered before
     * is seen by the reads that follow.  With no lock-free decider to order
     * against (srl__shm_lf_live): no fence, a locked RMW's worth of cycles
     * on every decision. */
    if (srl__shm_lf_live(s))
        SRL__SHM_FENCE(__ATOMIC_SEQ_CST);
    return (v & 1u) != 0;
}

static inline void srl__shm_slot_thaw(struct srl__shm *s, uint64_t b, unsigned i)
{
    uint16_t *q = srl__shm_slot_seq(s, b, i);
    uint16_t v = __atomic_load_n(q, __ATOMIC_RELAXED);
    __atomic_store_n(q, (uint16_t)((v | 1u) + 1u), __ATOMIC_RELEASE);
}

/* Slot of k in bucket b, or -1 (lock held). */
int srl__shm_find_locked(const struct srl__shm *s, uint64_t b, const struct srl__shm_key *k);
/* Whether key_len of slot i is in range, or not stored at all
 * (key_display 0). */
bool srl__shm_slot_len_ok(const struct srl__shm *s, uint64_t b, unsigned i);
/* Make slot i of bucket b (locked) current, and freeze it (seq odd): a
 * state of the previous generation is converted (srl__tier_convert, in the
 * undo record), a meta word that is not sound (or a seq found odd) is
 * reset and counted.  Returns the slot's compound under p (p from
 * srl__shm_pol_locked).  Every call is paired with srl__shm_slot_thaw
 * before the lock is released (and before the next call on that slot). */
const struct srl__compound *srl__shm_slot_current(struct srl__shm *s, const struct srl__shm_pol *p,
                                                  uint64_t b, unsigned i, uint64_t now);
/* Repair's check of slot i of bucket b (locked, its owner dead): identity,
 * and with p != NULL its generation, meta word and state.  And its reset
 * when the check fails: a damaged identity frees the slot, else (p !=
 * NULL) a fresh tier-0 state of p.  srl__shm_repair_bucket uses both. */
bool srl__shm_slot_valid(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b,
                         unsigned i, uint64_t now);
void srl__shm_slot_reset(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b, unsigned i,
                         uint64_t now);

/* -------------------------------------------------- shm_table.c, again */

int srl__shm_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                     srl_decision *d);
int srl__shm_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                          uint32_t cost, srl_decision *d);
int srl__shm_peek(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                  srl_decision *d);
/* srl_peek_tier: the key as a request of tier `tier` would find it. */
int srl__shm_peek_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                       uint32_t cost, srl_decision *d);
#define SRL__SHM_OWN_TIER UINT32_MAX   /* peek_as: the key's own tier */
/* A plain admission by the limits own (key-limits entry own_idx) instead
 * of a tier's (srl_acquire_limits; shm_keyset.c resolves them). */
int srl__shm_decide_own(srl_limiter *lim, const void *key, size_t len,
                        const struct srl__compound *own, unsigned own_idx, uint32_t cost,
                        srl_decision *d);
int srl__shm_enter(srl_limiter *lim, const void *key, size_t len, srl_lease *lease,
                   srl_decision *d);
int srl__shm_leave(srl_limiter *lim, srl_lease *lease);
int srl__shm_refund(srl_limiter *lim, const void *key, size_t len, uint32_t cost);
int srl__shm_reserve(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                     uint64_t max_wait, srl_decision *d);
/* For a store layered on a segment (tiered.c): call fn on key's state under
 * its bucket lock and undo record, with the segment's `now`.  insert: a
 * missing key is inserted fresh first (as srl_acquire would); else a
 * missing key is SRL_ENOENT and fn is not called.  fn returns 1 if it
 * answered the key as a denial (counted as one, per bucket and per key), 0
 * otherwise (not counted).  Returns 0, SRL_ENOENT, SRL_ENOSPC (insert into
 * a full table), or a lock error (SRL_ETIMEDOUT, ...). */
typedef int (*srl__shm_apply_fn)(void *state, uint64_t now, void *ctx);
int srl__shm_apply(srl_limiter *lim, const void *key, size_t len, int insert,
                   srl__shm_apply_fn fn, void *ctx);
/* Hash key into k and lock the bucket holding it: 0 with that bucket
 * locked and its slot in *slot, SRL_ENOENT with nothing locked if the key
 * is not there, or a lock error.  For the calls that change or read one
 * existing key (refund, peek, apply without insert; shm_walk.c's
 * key_state and reset_key). */
int srl__shm_locate(struct srl__shm *s, const void *key, size_t len, struct srl__shm_key *k,
                    uint64_t *bucket, int *slot);

/* --------------------------------------------------------- shm_walk.c */

int64_t srl__shm_evict_idle(srl_limiter *lim);
int64_t srl__shm_foreach(srl_limiter *lim, srl_foreach_fn fn, void *ctx);
int srl__shm_key_state(srl_limiter *lim, const void *key, size_t len, void *buf);
int srl__shm_reset_key(srl_limiter *lim, const void *key, size_t len);
/* The current limits of tier t (srl_tier_get). */
int srl__shm_tier_get(srl_limiter *lim, uint32_t t, srl_tier *out);
/* Initialise every bucket of a fresh mapping (creator only). */
int srl__shm_table_init(struct srl__shm *s);

/* ------------------------------------------------------ shm_control.c */

/* Operator control of one key (layout 9, srl.h "Operator control"): the
 * store's srl_key_exempt, srl_key_ban, srl_key_unban, srl_key_control_get
 * (SRL__CTL_*, limiter.h). */
int srl__shm_key_control(srl_limiter *lim, const void *key, size_t len, int op, uint64_t for_ns,
                         const char *reason, srl_key_control *out);
/* Lock the bucket of key (as srl__shm_locate), inserting it fresh first
 * when it is missing and insert is set (shm_keyset.c uses it too). */
int srl__shm_locate_or_insert(struct srl__shm *s, const void *key, size_t len, bool insert,
                              uint64_t *b, int *i);
/* The reason text of record index r (1-based, 0 none) into buf[SRL__SHM_REASON_TEXT + 1]:
 * "" for none or a bad entry (validated, untrusted). */
void srl__shm_reason_text(const struct srl__shm *s, unsigned r, char *buf);

/* -------------------------------------------------------- shm_evict.c */

/* on_full=evict: free the slot of the least recently used key of b1 and
 * b2 (both locked) that is not kept (srl__shm_slot_kept), counted in
 * evicted and evicted_active; its index, with its bucket in *fb, or -1. */
int srl__shm_evict_lru(struct srl__shm *s, const struct srl__shm_pol *p, uint64_t b1,
                       uint64_t b2, uint64_t now, uint64_t *fb);

/* ------------------------------------------------------- shm_keylim.c */

/* Entry idx's compound (resolved once per handle from a validated private
 * copy), or NULL: idx out of range, the entry not READY or damaged, or no
 * memory.  Any thread; no lock needed or taken. */
const struct srl__compound *srl__shm_keylim_cmp(struct srl__shm *s, unsigned idx);
/* The entry holding limits l (canonical bytes compared), claimed if new:
 * its index, or SRL_EPOLICY (invalid, a concurrency limit, or a state
 * larger than the slots'), SRL_ENOSPC (table full), SRL_ENOMEM; the
 * sentence in srl_last_error. */
int srl__shm_keylim_find(struct srl__shm *s, const srl_limits *l);
void srl__shm_keylim_free(struct srl__shm *s);
/* An entry's seal: FNV-1a 64 over it with state and sum taken as 0. */
uint64_t srl__shm_keylim_sum(const struct srl__shm_keylim *e);

/* ------------------------------------------------------- shm_keyset.c */

/* srl_key_set_limits (l NULL: clear) and srl_key_get_limits (get != NULL). */
int srl__shm_key_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *l,
                        srl_limits *get);
/* srl_acquire_limits on a shared or anonymous segment. */
int srl__shm_acquire_limits(srl_limiter *lim, const void *key, size_t len, const srl_limits *l,
                            uint32_t cost, srl_decision *d);

/* ---------------------------------------------- shm_change.c, shm_check.c */

/* shm_change.c: srl_policy_change on a shared segment (cfg normalised by
 * the prologue), or with one != NULL srl_policy_change_tier (cfg unused);
 * check: change nothing, only answer (srl_policy_change_check).
 * 0, or SRL_E* with the reason in msg. */
int srl__shm_policy_change(struct srl__shm *s, const srl_config *cfg, uint32_t tier,
                           const srl_limits *one, int check, char *msg, size_t len);
/* shm_check.c: the invariant checker (srl_check). */
int64_t srl__shm_check(srl_limiter *lim, srl_report_fn fn, void *ctx);

/* ---------------------------- shm_table.c: gen, counts, flood exchange */

/* Bump bucket b's gen (lock held): a slot of b may now decide otherwise. */
static inline void srl__shm_gen_bump(struct srl__shm *s, uint64_t b)
{
    SRL__SHM_SHARED_ADD(s, srl__shm_bucket(s, b)->gen, 1u);
}
/* Add n local denials of the key with fingerprint fp to bucket b (locked):
 * the bucket's denied (and would_deny on a dry-run handle) always, the
 * slot's denied only if the key is still in b (else that part is dropped). */
void srl__shm_count_denied(struct srl__shm *s, uint64_t b, const uint8_t fp[SRL__SHM_FP_BYTES],
                           uint32_t n);

/* The exchange between a plain decision under the lock and the flood
 * cache (shm_flood.c), as data, so the table calls nothing of the cache.
 * In: counts the caller's cache holds (pointers into its entries, which
 * the caller keeps locked): those of the bucket the decision locks are
 * added to it (srl__shm_count_denied) and zeroed.  Out: after a denial
 * with retry_after > 0, recorded = 1 and the bucket, its gen, the decision's
 * now and the slot's state (state_bytes into state), all read under the
 * lock after the decision. */
#define SRL__SHM_FLOOD_PEND 8u
struct srl__shm_flood_io {
    unsigned n;
    uint64_t pend_bucket[SRL__SHM_FLOOD_PEND];
    const uint8_t *pend_fp[SRL__SHM_FLOOD_PEND];
    uint32_t *pend_count[SRL__SHM_FLOOD_PEND];
    int recorded;
    uint64_t bucket;
    uint32_t gen;
    uint64_t now;
    const struct srl__shm_pol *pol;  /* the policy view the decision used */
    unsigned char *state;
};
/* srl_acquire_tier of (k hashed, tier, cost), exchanging io (may be NULL). */
int srl__shm_decide_plain(srl_limiter *lim, const struct srl__shm_key *k, const void *key,
                          size_t len, uint32_t tier, uint32_t cost, struct srl__shm_flood_io *io,
                          srl_decision *d);

/* -------------------------------------------------------- shm_flood.c */

/* Set up s->flood for this opener (NULL when the cache does not apply:
 * no SRL_CONFIG_FLOOD_CACHE, a concurrency limit, a state over 256 bytes).
 * 0 or SRL_ENOMEM. */
int srl__shm_flood_open(struct srl__shm *s, const srl_config *cfg);
/* Flush every pending count of every cache of this process (srl_stats_get,
 * srl_foreach on any shared handle). */
void srl__shm_flood_flush(void);
/* Unregister, flush, free (srl_close). */
void srl__shm_flood_close(struct srl__shm *s);
/* The store's srl_acquire / srl_acquire_tier: from this thread's cache when
 * it can answer exactly (no lock, no shared write), else the table's locked
 * decision, exchanging counts and a state copy with it. */
int srl__shm_flood_acquire(srl_limiter *lim, const void *key, size_t len, uint32_t cost,
                           srl_decision *d);
int srl__shm_flood_acquire_tier(srl_limiter *lim, uint32_t tier, const void *key, size_t len,
                                uint32_t cost, srl_decision *d);

/* ----------------------------------------------------- shm_lockfree.c */

/* Set s->lockfree for this opener: cfg asks for SRL_CONFIG_LOCKFREE, the
 * segment's slots are 16-aligned and the CPU has a 16-byte CAS; and
 * s->lf_pending: PASS unless the segment's lf_open says BIRTH.  Touches no
 * lock: a process that opens and never decides (mod_srl's root parent)
 * never locks a bucket. */
void srl__shm_lf_open(struct srl__shm *s, const srl_config *cfg);
/* Whether slots of a segment with this geometry can be swapped lock-free
 * (meta and TAT 16-aligned): also what srl__shm_geometry decided. */
bool srl__shm_lf_aligned(const struct srl__shm *s);
/* Whether a tier of compound c takes the lock-free path: one GCRA limit,
 * no ban period (view_new, shm_policy.c, keeps the answer per tier). */
bool srl__shm_lf_tier(const struct srl__compound *c);
/* A plain srl_acquire_tier of the found key k under an all-GCRA tier,
 * decided with one 16-byte CAS and no lock.  1 decided (*d filled,
 * counted; io, may be NULL, gets a denial's copy as the locked path
 * would give it), 0 not taken (the caller takes the locked path). */
int srl__shm_lf_decide(struct srl__shm *s, const struct srl__shm_key *k, uint32_t tier,
                       uint32_t cost, struct srl__shm_flood_io *io, srl_decision *d);

/* -------------------------------------------------------- shm_store.c */

extern const struct srl__store_ops srl__shm_ops;
/* The segment openers with srl__shm_ops (srl__shm_segment_open*). */
int srl__shm_open(const char *name, const srl_config *cfg, unsigned flags, srl_limiter **out);
int srl__shm_open_anonymous(const srl_config *cfg, srl_limiter **out);

#endif
