/*
 * shm_segment.c - segment lifecycle: create-or-open, validate, map, unmap.
 *
 * Creation (create_named): a creator first looks at the name; if anything
 * is there it opens it and reserves nothing.  Else it takes the creators'
 * lock (a flock on /dev/shm itself, bounded: creators_lock), looks again,
 * checks that the segment fits (shm_room.c: /dev/shm's free space, the
 * memory the kernel can give, the size guard: SRL_ENOSPC, SRL_ETOOBIG),
 * and builds the whole segment in an unnamed file (O_TMPFILE): mode,
 * header with state INIT and its pid, the whole size (posix_fallocate),
 * the table, READY with release ordering.  Only then is the file linked
 * to the name (build_and_link); a link that finds the name taken fails
 * with EEXIST, and that creator drops its segment and opens the other.
 * So a failure or a death at any point leaves nothing behind, and a file
 * at the name is READY from its first instant.  The lock bounds what
 * racing creators reserve (docs/design.md, "Creation"); the link alone
 * decides which segment is the one.
 *
 * An opener still checks the state (acquire load): a file at the name
 * that is not READY is not one this version's creators make (an older
 * version's creator, or a stray file), and it waits, bounded by
 * SRL__SHM_READY_WAIT_MS (by SRL__SHM_CREATOR_WAIT_MS while that file's
 * flock is held), then gives SRL_ESTALE if the creator named in it is
 * dead, SRL_ETIMEDOUT if it lives.  Then the header is validated as untrusted input (magic,
 * version, ABI, geometry recomputed from the policy and compared, size
 * against fstat) and the geometry is copied into the private handle.
 *
 * Layout 6: the header page keeps the policy at creation; the policy now
 * is in the two copies of pages 1 and 2 (shm_policy.c), which the creator
 * writes with the header (copy A, generation 0; copy B all zero, so never
 * valid).  An opener compares its config with the current copy, not with
 * the header: SRL_EMISMATCH, or with SRL_CHANGE a live change
 * (shm_change.c) once the handle is open.
 *
 * Locks: the creators' lock (above) and the creator's flock on its own
 * file, a sign of life only.  The header is immutable once READY (only the
 * creator writes it, before READY), and nobody else can touch a segment
 * being built: it has no name.
 */
#include "shm.h"
#include "shm_api.h"
#include "msg.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <stddef.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Internal result of one open round: start again (never returned to callers). */
#define RETRY 1

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

uint64_t srl__shm_abi_word(void)
{
    /* bits 0-15 sizeof(pthread_mutex_t), 16-23 pointer size, 24-31 1 for
     * little endian / 2 for big, 32-39 slots per bucket, 40-55 bucket head
     * size: everything the layout depends on besides the geometry. */
    const uint16_t probe = 1;
    uint64_t endian = *(const uint8_t *)&probe == 1 ? 1 : 2;
    return (uint64_t)sizeof(pthread_mutex_t) | (uint64_t)sizeof(void *) << 16 | endian << 24 |
           (uint64_t)SRL__SHM_SLOTS << 32 | (uint64_t)sizeof(struct srl__shm_bucket) << 40;
}

/* Some limit of tier 0 (l) or of a further tier of cfg is GCRA. */
static bool gcra_anywhere(const srl_config *cfg, const srl_limits *l)
{
    for (uint32_t j = 0; j < l->count && j < SRL_LIMITS_MAX; j++)
        if (l->limit[j].algorithm == SRL_GCRA)
            return true;
    for (uint32_t t = 0; cfg->tiers != NULL && t < cfg->tier_count; t++)
        for (uint32_t j = 0; j < cfg->tiers[t].limits.count && j < SRL_LIMITS_MAX; j++)
            if (cfg->tiers[t].limits.limit[j].algorithm == SRL_GCRA)
                return true;
    return false;
}

int srl__shm_geometry(struct srl__shm *s, const srl_config *cfg)
{
    struct srl__compound c;
    srl_limits one;
    const srl_limits *l = &cfg->limits;
    if (l->count == 0) {   /* a config not normalised by the prologue */
        if (srl_limits_of(&cfg->policy, &one) != 0)
            return SRL_EPOLICY;
        l = &one;
    }
    if (srl__compound_init(&c, l) != 0)
        return SRL_EPOLICY;
    /* Every slot holds the largest tier's state (tiers.c). */
    size_t state = srl__tiers_state_max(cfg, c.state_bytes);
    size_t counters = SRL__SLOT_STATE + state;
    /* key_len (2 bytes) is stored only with a display copy: it serves rlctl's
     * display alone, and without it a token-bucket slot is 56 bytes, not 64. */
    size_t keyinfo = cfg->key_display > 0 ? SRL__CTR_DISPLAY - SRL__CTR_KEY_LEN +
                                                (size_t)cfg->key_display : 0;
    /* Layout 7: a policy with a GCRA limit in some tier gets 16-aligned
     * slots, so that meta and TAT can be swapped by one 16-byte CAS
     * (shm_lockfree.c); others keep 8 (a token-bucket slot stays 56). */
    size_t align = gcra_anywhere(cfg, l) ? 16 : 8;
    size_t slot = round_up(counters + SRL__CTR_BYTES + keyinfo, align);
    size_t undo = round_up(sizeof(struct srl__shm_bucket), 8);
    size_t slots = round_up(undo + state, align);
    size_t bucket = round_up(slots + SRL__SHM_SLOTS * slot, 64);
    if (bucket > UINT32_MAX)
        return SRL_EPOLICY;
    s->buckets = (cfg->capacity + SRL__SHM_SLOTS - 1) / SRL__SHM_SLOTS;
    s->state_bytes = (uint32_t)state;
    s->counters_off = (uint32_t)counters;
    s->slot_bytes = (uint32_t)slot;
    s->undo_off = (uint32_t)undo;
    s->slots_off = (uint32_t)slots;
    s->bucket_bytes = (uint32_t)bucket;
    s->key_display = cfg->key_display;
    /* Layout 9: the operator area follows the table (shm.h). */
    s->map_bytes = SRL__SHM_HEADER_BYTES + (size_t)s->buckets * bucket + SRL__SHM_OP_BYTES;
    return 0;
}

uint64_t srl__shm_slots_for(const srl_config *cfg, uint32_t *bucket_slots)
{
    *bucket_slots = SRL__SHM_SLOTS;
    struct srl__shm g;
    memset(&g, 0, sizeof g);
    return srl__shm_geometry(&g, cfg) == 0 ? g.buckets * SRL__SHM_SLOTS : 0;
}

int srl_name_check(const char *name)
{
    if (name == NULL)
        return SRL_EINVAL;
    const char *p = name[0] == '/' ? name + 1 : name;
    size_t n = strnlen(p, SRL_NAME_MAX + 1);
    if (n == 0 || n > SRL_NAME_MAX)
        return SRL_EINVAL;
    bool all_dots = true;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return SRL_EINVAL;
        all_dots = all_dots && c == '.';
    }
    /* "." and ".." name the directory itself, and rlctl (which applies this
     * same rule) could never destroy a segment called "...". */
    return all_dots ? SRL_EINVAL : 0;
}

int srl__shm_name(const char *name, char buf[256])
{
    int rc = srl_name_check(name);
    if (rc != 0)
        return rc;
    const char *p = name[0] == '/' ? name + 1 : name;
    buf[0] = '/';
    memcpy(buf + 1, p, strlen(p) + 1);
    return 0;
}

static uint64_t wall_ns(void)
{
    return srl__clock_ns(CLOCK_REALTIME);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int errno_code(int e)
{
    switch (e) {
    case ENOENT: return SRL_ENOENT;
    case EEXIST: return SRL_EEXIST;
    case EACCES: case EPERM: return SRL_EACCES;
    case ENOSPC: case EFBIG: return SRL_ENOSPC;
    case ENOMEM: return SRL_ENOMEM;
    case EISDIR: return SRL_EFOREIGN;   /* a directory at the name is not ours */
    default: errno = e; return SRL_ESYS;
    }
}

static struct srl__shm *handle_new(const srl_config *cfg, srl_store_kind kind,
                                   const struct srl__store_ops *ops)
{
    struct srl__shm *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    /* cfg was normalised and validated by the prologue: this cannot fail. */
    (void)srl__limiter_init(&s->lim, ops, cfg);
    s->lim.impl = s;
    s->kind = kind;
    s->fd = -1;
    s->mutex_kind = srl__shm_mutex_own_kind();
    pthread_mutex_init(&s->pol_mu, NULL);
    pthread_mutex_init(&s->change_mu, NULL);
    return s;
}

/* The header a creator writes first (state INIT). */
static void header_fill(struct srl__shm_header *h, const struct srl__shm *s,
                        const srl_config *cfg)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, SRL__SHM_MAGIC, 8);
    h->version = SRL__SHM_VERSION;
    h->state = SRL__SHM_INIT;
    h->abi = srl__shm_abi_word();
    h->limits = cfg->limits;
    h->tier_count = s->lim.tier_count;
    memcpy(h->tiers, s->lim.tier_def, sizeof h->tiers);   /* canonical, zero-padded */
    h->buckets = s->buckets;
    h->capacity = s->buckets * SRL__SHM_SLOTS;
    h->table_offset = SRL__SHM_HEADER_BYTES;
    h->total_bytes = s->map_bytes;
    h->op_offset = s->map_bytes - SRL__SHM_OP_BYTES;
    h->keylim_count = SRL__SHM_KEYLIMS;
    h->reason_count = SRL__SHM_REASONS;
    h->slots_per_bucket = SRL__SHM_SLOTS;
    h->bucket_bytes = s->bucket_bytes;
    h->slot_bytes = s->slot_bytes;
    h->state_bytes = s->state_bytes;
    h->key_display = s->key_display;
    h->on_full = (uint32_t)cfg->on_full;
    h->mode = cfg->mode;
    struct srl__proc me;
    srl__proc_self(&me);
    h->creator_pid = me.pid;
    h->creator_start = me.start;
    h->creator_pidns = me.pidns;
    h->created_unix_ns = wall_ns();
    randombytes_buf(h->hash_key, sizeof h->hash_key);
    h->header_sum = srl__shm_header_sum(h);
}

/* Copy A of a new segment (pages is the whole header area): generation 0,
 * the creation policy.  Copy B stays zero (its sum never matches). */
static void policy_fill_first(unsigned char *pages, const struct srl__shm *s)
{
    const struct srl__shm_header *h = (const struct srl__shm_header *)pages;
    srl__shm_policy_fill((struct srl__shm_policy *)(pages + SRL__SHM_POLICY_OFFSET(0)), 0,
                         &h->limits, s->lim.tier_def, s->lim.tier_count);
}

uint64_t srl__shm_header_sum(const struct srl__shm_header *h)
{
    struct srl__shm_header c;
    memcpy(&c, h, sizeof c);
    c.state = 0;
    c.header_sum = 0;
    const unsigned char *b = (const unsigned char *)&c;
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof c; i++)
        x = (x ^ b[i]) * 0x100000001b3ull;
    return x;
}

/* Initialise the table of a fresh, zeroed mapping and publish READY.  A
 * creator that asks for the lock-free path says so in lf_open before READY
 * (SRL__SHM_LF_BIRTH): no locked decision can ever have read NONE, so no
 * lock-free opener of this segment needs to pass the bucket locks.  Not a
 * dry-run creator: it decides under the lock (shm_lockfree.c), and BIRTH
 * would make every locked writer pay for atomics no decider needs. */
static int publish(struct srl__shm *s, const srl_config *cfg)
{
    int rc = srl__shm_table_init(s);
    if (rc != 0)
        return rc;
    if ((cfg->flags & (SRL_CONFIG_LOCKFREE | SRL_CONFIG_DRY_RUN)) == SRL_CONFIG_LOCKFREE &&
        srl__shm_lf_aligned(s))
        srl__shm_live(s)->lf_open = SRL__SHM_LF_BIRTH;
    memcpy(s->hash_key, srl__shm_hdr(s)->hash_key, sizeof s->hash_key);
    s->header_sum = srl__shm_hdr(s)->header_sum;
    s->created = srl__shm_hdr(s)->limits;
    __atomic_store_n(&srl__shm_hdr(s)->state, SRL__SHM_READY, __ATOMIC_RELEASE);
    return 0;
}

/* ------------------------------------------------------------ create */

/* The first half of a creation, on a file nobody else can see yet (an
 * O_TMPFILE, open_round): its mode, then the header page with state INIT
 * and the creator's identity, then the policy pages.  Nothing here is
 * visible at the name, so a failure leaves nothing behind. */
static int create_header(struct srl__shm *s, int fd, const srl_config *cfg)
{
    if (fchmod(fd, cfg->mode) != 0)
        return errno_code(errno);
    unsigned char *pages = calloc(1, SRL__SHM_HEADER_BYTES);
    if (pages == NULL)
        return SRL_ENOMEM;
    header_fill((struct srl__shm_header *)pages, s, cfg);
    policy_fill_first(pages, s);
    errno = 0;
    ssize_t w = pwrite(fd, pages, SRL__SHM_HEADER_BYTES, 0);
    free(pages);
    if (w != (ssize_t)SRL__SHM_HEADER_BYTES)
        return errno_code(errno ? errno : ENOSPC);
    return 0;
}

/* ------------------------------------------------------------ open */

/* Validate a READY header against the handle's expectations (or adopt its
 * geometry when cfg is NULL).  size is the file's size from fstat. */
static int validate(struct srl__shm *s, const struct srl__shm_header *hp, uint64_t size,
                    const srl_config *cfg, srl_config *adopted,
                    srl_tier adopted_tiers[SRL_TIERS_MAX - 1])
{
    struct srl__shm_header h;
    memcpy(&h, hp, sizeof h);       /* one snapshot: the segment is untrusted */
    if (memcmp(h.magic, SRL__SHM_MAGIC, 8) != 0)
        return SRL_EFOREIGN;
    if (h.version != SRL__SHM_VERSION || h.abi != srl__shm_abi_word())
        return SRL_EVERSION;
    if (h.header_sum != srl__shm_header_sum(&h))
        return SRL_ECORRUPT;
    srl_config seg;
    srl_config_init(&seg);
    /* srl_limits_validate knows every algorithm, and wants every reserved
     * word zero: an unknown algorithm number or a stray bit is corruption. */
    seg.limits = h.limits;
    seg.capacity = h.capacity;
    seg.key_display = h.key_display;
    seg.on_full = h.on_full == SRL_ON_FULL_DENY    ? SRL_ON_FULL_DENY
                  : h.on_full == SRL_ON_FULL_EVICT ? SRL_ON_FULL_EVICT
                                                   : SRL_ON_FULL_ALLOW;
    srl_limits canon;
    if (srl_limits_validate(&seg.limits) != 0 || srl__limits_canonical(&seg.limits, &canon) != 0 ||
        memcmp(&canon, &seg.limits, sizeof canon) != 0)
        return SRL_ECORRUPT;   /* a creator writes the canonical form only */
    seg.policy = seg.limits.limit[0];
    /* The tier table is as untrusted as the rest: every rule a config's
     * table obeys, canonical, and zero past its count (tiers.c). */
    if (h.tier_count < 1 || h.tier_count > SRL_TIERS_MAX || h.tier_pad != 0 ||
        !srl__tiers_valid(&seg.limits, h.tiers, h.tier_count - 1))
        return SRL_ECORRUPT;
    seg.tiers = h.tiers;
    seg.tier_count = h.tier_count - 1;
    if (h.capacity == 0 || h.capacity > SRL_CAPACITY_MAX || h.key_display > SRL_KEY_DISPLAY_MAX ||
        h.slots_per_bucket != SRL__SHM_SLOTS || h.table_offset != SRL__SHM_HEADER_BYTES)
        return SRL_ECORRUPT;
    struct srl__shm g = {0};
    if (srl__shm_geometry(&g, &seg) != 0)
        return SRL_ECORRUPT;
    if (g.buckets != h.buckets || g.buckets * SRL__SHM_SLOTS != h.capacity ||
        g.bucket_bytes != h.bucket_bytes || g.slot_bytes != h.slot_bytes ||
        g.state_bytes != h.state_bytes || g.map_bytes != h.total_bytes || size < g.map_bytes ||
        h.op_offset != g.map_bytes - SRL__SHM_OP_BYTES || h.keylim_count != SRL__SHM_KEYLIMS ||
        h.reason_count != SRL__SHM_REASONS)
        return SRL_ECORRUPT;
    if (cfg != NULL) {
        struct srl__shm want = {0};
        int rc = srl__shm_geometry(&want, cfg);
        if (rc != 0)
            return rc;
        /* What can never change.  The policy itself is compared with the
         * current copy once the segment is mapped (open_existing). */
        if (want.buckets != g.buckets || cfg->key_display != h.key_display ||
            s->lim.tier_count != h.tier_count)
            return SRL_EMISMATCH;
        for (uint32_t t = 1; t < h.tier_count; t++)
            if (memcmp(s->lim.tier_def[t - 1].name, h.tiers[t - 1].name, sizeof h.tiers[0].name) != 0)
                return SRL_EMISMATCH;
    }
    s->buckets = g.buckets;
    s->bucket_bytes = g.bucket_bytes;
    s->slot_bytes = g.slot_bytes;
    s->state_bytes = g.state_bytes;
    s->key_display = g.key_display;
    s->undo_off = g.undo_off;
    s->slots_off = g.slots_off;
    s->counters_off = g.counters_off;
    s->map_bytes = g.map_bytes;
    memcpy(s->hash_key, h.hash_key, sizeof s->hash_key);
    s->header_sum = h.header_sum;
    s->created = h.limits;
    if (adopted != NULL) {
        memcpy(adopted_tiers, h.tiers, sizeof h.tiers);
        seg.tiers = adopted_tiers;   /* h is this frame's snapshot */
        *adopted = seg;
    }
    return 0;
}

/* The creator of an unfinished header has exited (not merely slow).  The
 * header is not READY, so it is not checksummed yet: these words are read
 * as they are, and a wrong guess costs only SRL_ESTALE vs SRL_ETIMEDOUT. */
static bool creator_dead(const struct srl__shm_header *h)
{
    struct srl__proc p = {h->creator_pid, h->creator_start, h->creator_pidns};
    return srl__proc_state(&p) == SRL__PROC_DEAD;
}

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != 0)
            return false;
    return true;
}

/* The creator is inside create() now: it holds the flock it took right
 * after shm_open (open_round).  Asked only of an unfinished segment. */
static bool creator_at_work(int fd)
{
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        (void)flock(fd, LOCK_UN);
        return false;
    }
    return errno == EWOULDBLOCK;
}

/* Wait (bounded) for the segment at fd to be READY; map its header page into
 * *hdr.  Returns 0, RETRY (its creator failed), SRL_ESTALE, SRL_ETIMEDOUT,
 * SRL_EFOREIGN, SRL_ECORRUPT or an error. */
static int wait_ready(int fd, struct srl__shm_header **hdr, struct stat *st)
{
    uint64_t until = mono_ms() + SRL__SHM_READY_WAIT_MS;
    bool last_look = false;
    for (;;) {
        if (fstat(fd, st) != 0)
            return errno_code(errno);
        /* A FIFO or device node has size 0 and would pass for an unfinished
         * segment; calling it stale would tell the operator to unlink it. */
        if (!S_ISREG(st->st_mode))
            return SRL_EFOREIGN;
        /* The header page (the policy pages follow it, and are read only
         * once READY says the creator wrote them and the whole size). */
        if ((uint64_t)st->st_size >= SRL__SHM_PAGE_BYTES) {
            if (*hdr == NULL) {
                void *p = mmap(NULL, SRL__SHM_PAGE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
                if (p == MAP_FAILED)
                    return errno_code(errno);
                *hdr = p;
            }
            struct srl__shm_header *h = *hdr;
            if (memcmp(h->magic, SRL__SHM_MAGIC, 8) == 0) {
                uint32_t state = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
                /* The size again: the one above may predate the creator's
                 * allocation, which READY follows. */
                if (state == SRL__SHM_READY)
                    return fstat(fd, st) == 0 ? 0 : errno_code(errno);
                if (state == SRL__SHM_FAILED)
                    return RETRY;
                if (state != SRL__SHM_INIT)
                    return SRL_ECORRUPT;
                if (creator_dead(h))
                    return SRL_ESTALE;
            } else if (!all_zero(h->magic, 8)) {
                return SRL_EFOREIGN;   /* someone else's data, not an unfinished create */
            }
        } else if (st->st_size > 0) {
            /* A creator writes the whole header page at once: a short file
             * that is not empty was never ours. */
            return SRL_EFOREIGN;
        }
        uint64_t now_ms = mono_ms();
        /* Past the bound, a creator still inside create() (it holds the
         * file's flock) is slow, not gone: it gets SRL__SHM_CREATOR_WAIT_MS
         * in all before the waiter gives up. */
        if (now_ms >= until && now_ms < until - SRL__SHM_READY_WAIT_MS + SRL__SHM_CREATOR_WAIT_MS &&
            creator_at_work(fd)) {
            struct timespec nap = {0, 2 * 1000 * 1000};
            nanosleep(&nap, NULL);
            continue;
        }
        if (now_ms >= until) {
            /* What this round saw may predate a pause of ours (a waiter is
             * descheduled too): judge only on a look taken after the
             * bound, from the top. */
            if (!last_look) {
                last_look = true;
                continue;
            }
            /* Empty or all-zero header and nobody finished it: not a file
             * a creator of this version made (build_and_link names a file
             * only once it is READY), or a copy of an older
             * version's creator that died before its first write. */
            if (*hdr == NULL || all_zero((*hdr)->magic, 8))
                return SRL_ESTALE;
            return SRL_ETIMEDOUT;
        }
        struct timespec nap = {0, 2 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

/* Trust (docs/design.md, "Trust"): a segment is mapped only if it belongs
 * to the caller's effective uid or to the one uid the caller names, root
 * included (root is the most valuable process to make write through a
 * mutex's robust-list pointers), and grants write to group or others only
 * as far as the caller's own mode allows.  Nothing here comes from the
 * header: its author could write anything there. */
static int check_owner(const struct stat *st, uint32_t trust_uid, uint32_t trust_mode)
{
    uint32_t owner = (uint32_t)st->st_uid;
    if (owner != (uint32_t)geteuid() && (trust_uid == SRL_OWNER_SELF || owner != trust_uid))
        return SRL_EACCES;
    if (((uint32_t)st->st_mode & 022u & ~trust_mode) != 0)
        return SRL_EACCES;
    return 0;
}

/* Whether the handle's table (from the opener's config) equals view p's. */
static bool same_table(const struct srl__shm *s, const struct srl__shm_pol *p)
{
    if (p->tier_count != s->lim.tier_count ||
        memcmp(&p->def[0].limits, &s->lim.cmp.limits, sizeof p->def[0].limits) != 0)
        return false;
    for (uint32_t t = 1; t < p->tier_count; t++)
        if (memcmp(&p->def[t].limits, &s->lim.tier_def[t - 1].limits, sizeof p->def[t].limits) != 0)
            return false;
    return true;
}

/* The policy now (layout 6: the current copy, validated as untrusted).
 * want: the opener's config, which must equal it (else SRL_EMISMATCH, or
 * with SRL_CHANGE a change once open: s->change_pending).  No want: the
 * handle adopts it, with cfg's runtime choices. */
static int take_current(struct srl__shm *s, const srl_config *cfg, const srl_config *want)
{
    const struct srl__shm_pol *p = srl__shm_pol_get(s, false);
    if (p == NULL)
        return SRL_ECORRUPT;
    if (want != NULL) {
        s->change_pending = !same_table(s, p);
        return s->change_pending && !s->open_change ? SRL_EMISMATCH : 0;
    }
    srl_config a;
    srl_config_init(&a);
    a.limits = p->def[0].limits;
    a.policy = a.limits.limit[0];
    a.tiers = p->def + 1;
    a.tier_count = p->tier_count - 1;
    a.capacity = s->buckets * SRL__SHM_SLOTS;
    a.key_display = s->key_display;
    a.on_full = s->lim.on_full;
    a.lock_timeout_ms = s->lim.lock_timeout_ms;
    if (cfg != NULL) {
        a.ticker = cfg->ticker;
        a.flags = cfg->flags;   /* the opener's dry run, never the segment's */
    }
    if (srl__limiter_init(&s->lim, s->lim.ops, &a) != 0)
        return SRL_ECORRUPT;
    s->lim.impl = s;
    return 0;
}

/* Open the segment at fd.  want is the config to compare with (NULL: adopt
 * the segment's policy and geometry); cfg, if given, supplies the trust and
 * the caller's runtime choices either way. */
static int open_existing(struct srl__shm *s, int fd, const srl_config *cfg,
                         const srl_config *want)
{
    uint32_t trust_uid = cfg != NULL ? cfg->owner_uid : SRL_OWNER_SELF;
    uint32_t trust_mode = cfg != NULL ? cfg->mode : 0600u;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return errno_code(errno);
    if (!S_ISREG(st.st_mode))
        return SRL_EFOREIGN;
    /* Owner first: a stranger's file costs no ready-wait and reads nothing. */
    int rc = check_owner(&st, trust_uid, trust_mode);
    if (rc != 0)
        return rc;
    struct srl__shm_header *hdr = NULL;
    rc = wait_ready(fd, &hdr, &st);
    /* Again on the final fstat: the creator fchmods after creating. */
    if (rc == 0)
        rc = check_owner(&st, trust_uid, trust_mode);
    srl_config adopted;
    srl_tier adopted_tiers[SRL_TIERS_MAX - 1];
    if (rc == 0)
        rc = validate(s, hdr, (uint64_t)st.st_size, want, &adopted, adopted_tiers);
    if (hdr != NULL)
        munmap(hdr, SRL__SHM_PAGE_BYTES);
    if (rc != 0)
        return rc;
    if (want == NULL) {
        if (cfg != NULL) {
            adopted.lock_timeout_ms = cfg->lock_timeout_ms;
            adopted.ticker = cfg->ticker;
            adopted.flags = cfg->flags;   /* the opener's dry run, never the segment's */
        }
        if (srl__limiter_init(&s->lim, s->lim.ops, &adopted) != 0)
            return SRL_ECORRUPT;
        s->lim.impl = s;
    }
    void *p = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return errno_code(errno);
    s->base = p;
    s->mode = (uint32_t)st.st_mode & 0777u;
    s->owner_uid = (uint32_t)st.st_uid;
    /* The header may have changed between the snapshot and this mapping only
     * if someone rewrote the file: validate the mapped copy once more. */
    rc = validate(s, srl__shm_hdr(s), (uint64_t)st.st_size, want, NULL, NULL);
    if (rc == 0 && __atomic_load_n(&srl__shm_hdr(s)->state, __ATOMIC_ACQUIRE) != SRL__SHM_READY)
        rc = SRL_ECORRUPT;
    if (rc == 0)
        rc = take_current(s, cfg, want);
    return rc;
}

/* shm_open's failure as an SRL_E* code.  glibc reports a directory at the
 * name as EINVAL (it folds EISDIR into it), so look: a directory is not an
 * srl segment (SRL_EFOREIGN), whatever errno says. */
static int open_errno(const char *path, int e)
{
    if (e == EINVAL || e == EISDIR) {
        char full[300];
        struct stat st;
        snprintf(full, sizeof full, "/dev/shm%s", path);
        if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode))
            return SRL_EFOREIGN;
    }
    return errno_code(e);
}

/* The creators' lock: an exclusive flock on the /dev/shm directory itself,
 * held from "the name is free" to the link of a built segment.  It
 * serialises the creators of the host (of every name: creations are rare
 * and short), so that racing creators of one name do not each reserve a
 * whole segment before the link decides, and each room check sees the
 * memory the previous creator took.  It is a bound on waste, not what
 * makes one segment (the link does that): it needs no file (nothing to
 * leave behind; any user can flock a directory it can open), and it is
 * given up after SRL__SHM_CREATOR_WAIT_MS (a stopped or hostile holder
 * costs that wait, never the creation) or as soon as the name appears.
 * Returns the locked descriptor, -1 if the lock was not had (build
 * unserialised), or -2 if the name appeared meanwhile. */
static int creators_lock(const char *full)
{
    int dfd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    uint64_t until = mono_ms() + SRL__SHM_CREATOR_WAIT_MS;
    struct stat st;
    while (flock(dfd, LOCK_EX | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || mono_ms() >= until) {
            close(dfd);
            return -1;
        }
        if (lstat(full, &st) == 0) {
            close(dfd);
            return -2;
        }
        struct timespec nap = {0, 2 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    return dfd;
}

/* Build the whole segment in an unnamed file (an O_TMPFILE in /dev/shm,
 * where glibc's shm_open puts every name): mode, header (INIT), the whole
 * size reserved with posix_fallocate (a full tmpfs fails here with ENOSPC,
 * never later with SIGBUS), the table, READY; only then link it to the
 * name.  A creator that fails or dies at any point before the link leaves
 * nothing: its file has no name and vanishes with its descriptor.  So a
 * file at the name is READY from the moment it appears, and no waiter can
 * take a creator descheduled mid-way for a dead one.  The link fails with
 * EEXIST if another creator's segment got the name first (one that did
 * not have the creators' lock): this one is then dropped whole.  Returns 0
 * with *fdp the linked, mapped segment, SRL_EEXIST (nothing kept), or
 * another SRL_E* code. */
static int build_and_link(struct srl__shm *s, const char *path, const char *full,
                          const srl_config *cfg, int *fdp)
{
    int rc = srl__room_check(cfg, s->map_bytes, 1, NULL, 0);
    if (rc != 0)
        return rc;
    int fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno_code(errno);
    /* Held until linked: a file at the name that is not READY (a creator
     * of an older version, or SRL__SHM_TEST_NO_READY) is judged alive or
     * dead by it (wait_ready). */
    rc = flock(fd, LOCK_EX | LOCK_NB) == 0 ? create_header(s, fd, cfg) : errno_code(errno);
    if (rc == 0) {
        int e = posix_fallocate(fd, 0, (off_t)s->map_bytes);
        if (e != 0)
            rc = errno_code(e);
    }
    if (rc == 0) {
        SRL__SHM_PARK_BUILT(fd);
        void *p = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            rc = errno_code(errno);
        } else {
            s->base = p;
            s->mode = cfg->mode;
            s->owner_uid = (uint32_t)geteuid();
            rc = publish(s, cfg);
        }
    }
    if (rc == 0) {
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, self, AT_FDCWD, full, AT_SYMLINK_FOLLOW) != 0)
            rc = errno == EEXIST ? SRL_EEXIST : open_errno(path, errno);
    }
    (void)flock(fd, LOCK_UN);
    if (rc != 0) {
        if (s->base != NULL)   /* ours: nothing maps s->base before a create */
            munmap(s->base, s->map_bytes);
        s->base = NULL;
        close(fd);             /* and the unnamed file is gone */
        return rc;
    }
    *fdp = fd;
    return 0;
}

/* Create the segment at path unless something is there already:
 * SRL_EEXIST (nothing reserved), 0 with *fdp the new segment, or an error. */
static int create_named(struct srl__shm *s, const char *path, const srl_config *cfg, int *fdp)
{
    char full[300];
    struct stat st;
    snprintf(full, sizeof full, "/dev/shm%s", path);
    if (lstat(full, &st) == 0)
        return SRL_EEXIST;
    int lock = creators_lock(full);
    int rc;
    if (lock == -2 || (lock >= 0 && lstat(full, &st) == 0))
        rc = SRL_EEXIST;   /* made while we waited */
    else
        rc = build_and_link(s, path, full, cfg, fdp);
    if (lock >= 0)
        close(lock);       /* and with it the flock */
    return rc;
}

/* One attempt of srl__shm_open: 0, an SRL_E* code, or RETRY. */
static int open_round(struct srl__shm *s, const char *path, const srl_config *cfg,
                      unsigned flags)
{
    int fd = -1, rc = 0;
    bool created = false;
    if (flags & SRL_CREATE) {
        rc = create_named(s, path, cfg, &fd);
        created = rc == 0;
        if (rc == SRL_EEXIST && !(flags & SRL_EXCL))
            rc = 0;   /* someone else's: open it below */
    }
    if (fd < 0 && rc == 0) {
        fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0)
            /* Gone between our two looks: someone unlinked it. */
            rc = errno == ENOENT && (flags & SRL_CREATE) ? RETRY : open_errno(path, errno);
    }
    if (rc == 0 && !created)
        rc = open_existing(s, fd, cfg, (flags & SRL_ADOPT) ? NULL : cfg);
    if (rc == 0) {
        s->fd = fd;  /* kept to fstat: srl_check and srl_info see a truncation */
    } else if (fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return rc;
}

int srl_room_check(const srl_config *cfg, char *msg, size_t len)
{
    srl_config norm;
    const srl_config *use;
    srl_limiter *unused;
    int rc = srl__open_prologue(cfg, 0, &norm, &use, &unused);
    struct srl__shm g = {0};
    if (rc == 0)
        rc = srl__shm_geometry(&g, use);
    if (rc != 0)
        return srl__say(msg, len, rc, "%s", srl_strerror(rc));
    return srl__room_check(use, g.map_bytes, 1, msg, len);
}

static int segment_open(const char *name, const srl_config *cfg, unsigned flags,
                        const struct srl__store_ops *ops, srl_limiter **out)
{
    srl_config defaults;
    const srl_config *use;
    int rc = srl__open_prologue(cfg, !(flags & SRL_CREATE), &defaults, &use, out);
    if (rc != 0)
        return rc;
    if (cfg != NULL)
        cfg = use;   /* normalised: limits always filled; NULL still means adopt */
    if ((flags & ~(SRL_CREATE | SRL_EXCL | SRL_ADOPT | SRL_CHANGE)) != 0 ||
        ((flags & SRL_EXCL) && !(flags & SRL_CREATE)) ||
        ((flags & SRL_ADOPT) && (flags & (SRL_CREATE | SRL_CHANGE))) ||
        ((flags & SRL_CHANGE) && cfg == NULL))
        return SRL_EINVAL;
    char path[256];
    rc = srl__shm_name(name, path);
    if (rc != 0)
        return rc;
    struct srl__shm *s = handle_new(use, SRL_STORE_SHARED, ops);
    if (s == NULL)
        return SRL_ENOMEM;
    memcpy(s->name, path, strlen(path) + 1);
    s->open_change = (flags & SRL_CHANGE) != 0;
    if (cfg != NULL && (rc = srl__shm_geometry(s, cfg)) != 0) {
        free(s);
        return rc;
    }

    /* A few rounds: a creator that fails (say ENOSPC) marks its header
     * FAILED and unlinks the name, and whoever was waiting on it starts over
     * (and, with SRL_CREATE, tries to create it itself). */
    for (int round = 0;; round++) {
        rc = open_round(s, path, cfg, flags);
        if (rc != RETRY)
            break;
        if (round == 3) {
            rc = SRL_ESTALE;    /* a FAILED header nobody unlinked: unlink it */
            break;
        }
    }
    /* From here the policy may change under the handle (srl_policy_change;
     * with SRL_CHANGE and change_pending, srl__shm_open makes the change:
     * shm_change.c sits below this file). */
    s->lim.live_state_bytes = s->state_bytes;
    s->lim.tier_get = srl__shm_tier_get;
    if (rc != 0) {
        srl__shm_unmap(s);
        return rc;
    }
    *out = &s->lim;
    return 0;
}

int srl__shm_segment_open(const char *name, const srl_config *cfg, unsigned flags,
                          const struct srl__store_ops *ops, srl_limiter **out)
{
    return segment_open(name, cfg, flags, ops, out);
}


int srl__shm_segment_open_anonymous(const srl_config *cfg, const struct srl__store_ops *ops,
                                    srl_limiter **out)
{
    srl_config unused;
    int rc = srl__open_prologue(cfg, 0, &unused, &cfg, out);
    if (rc != 0)
        return rc;
    struct srl__shm *s = handle_new(cfg, SRL_STORE_ANONYMOUS, ops);
    if (s == NULL)
        return SRL_ENOMEM;
    if ((rc = srl__shm_geometry(s, cfg)) != 0) {
        free(s);
        return rc;
    }
    /* Its pages are RAM as a named segment's are, all touched by the
     * table's initialisation below. */
    if ((rc = srl__room_check(cfg, s->map_bytes, 0, NULL, 0)) != 0) {
        free(s);
        return rc;
    }
    void *p = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        rc = errno_code(errno);
        free(s);
        return rc;
    }
    s->base = p;
    s->mode = 0600;
    s->owner_uid = (uint32_t)geteuid();
    header_fill(srl__shm_hdr(s), s, cfg);
    policy_fill_first(s->base, s);
    s->lim.tier_get = srl__shm_tier_get;
    rc = publish(s, cfg);
    if (rc != 0) {
        srl__shm_unmap(s);
        return rc;
    }
    *out = &s->lim;
    return 0;
}

void srl__shm_unmap(struct srl__shm *s)
{
    if (s == NULL)
        return;
    if (s->base != NULL)
        munmap(s->base, s->map_bytes);
    if (s->fd >= 0)
        close(s->fd);
    srl__shm_pol_free(s);
    srl__shm_keylim_free(s);
    pthread_mutex_destroy(&s->pol_mu);
    pthread_mutex_destroy(&s->change_mu);
    free(s);
}

int64_t srl__shm_check_header(struct srl__shm *s, srl_report_fn fn, void *ctx)
{
    char line[256];
    int64_t problems = 0;
    const struct srl__shm_header *h = srl__shm_hdr(s);
    struct srl__shm_header c;
    memcpy(&c, h, sizeof c);
    if (c.header_sum != srl__shm_header_sum(&c)) {
        problems++;
        if (fn != NULL)
            fn(ctx, "header: checksum does not match its fields (the header page was "
                    "changed after creation): destroy the segment and recreate it");
    }
    struct stat st;
    if (s->fd >= 0 && fstat(s->fd, &st) == 0 && (uint64_t)st.st_size < s->map_bytes) {
        problems++;
        if (fn != NULL) {
            snprintf(line, sizeof line,
                     "file: %llu bytes, but the segment needs %llu: it was truncated, and a "
                     "worker that touches the missing part dies of SIGBUS: destroy the segment "
                     "and restart its workers",
                     (unsigned long long)st.st_size, (unsigned long long)s->map_bytes);
            fn(ctx, line);
        }
    }
    return problems;
}

uint64_t srl__shm_file_bytes(const struct srl__shm *s)
{
    struct stat st;
    return s->fd >= 0 && fstat(s->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}
