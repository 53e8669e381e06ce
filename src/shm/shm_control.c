/*
 * shm_control.c - operator control of one key on a segment (layout 9,
 * issue 41): exemption, ban by hand, their reading back; and the reason
 * table of the operator area.
 *
 * What it writes: a slot's tier word flags (SRL__SLOT_F_*) and its operator
 * record (shm.h), under the key's bucket lock with the slot frozen (seq
 * odd), then the bucket's gen bumped: a lock-free decider's CAS fails on
 * the changed meta, and a flood cache's copy of the bucket stops answering.
 * The decisions that honour them are in shm_table.c (decide_slot); the
 * walks that keep such keys are shm_walk.c and shm_table.c's reclaim.
 *
 * The reason table (struct srl__shm_reason[SRL__SHM_REASONS] after the
 * key-limits table): entries are claimed by a CAS of state FREE -> BUSY,
 * filled, then published READY (release); never freed while the segment
 * lives (a reason is reused by its text).  Its bytes are only shown: a
 * reader copies at most SRL__SHM_REASON_TEXT bytes and NUL-terminates, so a
 * forged entry is a wrong text, never a wrong address.
 *
 * Locks: one bucket lock at a time (srl__shm_locate); nothing else.
 */
#include "shm.h"

#include <string.h>

static struct srl__shm_reason *reason_table(const struct srl__shm *s)
{
    return (struct srl__shm_reason *)(s->base + s->map_bytes - SRL__SHM_OP_BYTES +
                                      SRL__SHM_KEYLIMS * sizeof(struct srl__shm_keylim));
}

void srl__shm_reason_text(const struct srl__shm *s, unsigned r, char *buf)
{
    buf[0] = '\0';
    if (r == 0 || r > SRL__SHM_REASONS)
        return;   /* none, or damage: shown as none */
    const struct srl__shm_reason *e = &reason_table(s)[r - 1];
    if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != SRL__OP_READY)
        return;
    memcpy(buf, e->text, SRL__SHM_REASON_TEXT);
    buf[SRL__SHM_REASON_TEXT] = '\0';
    for (char *c = buf; *c != '\0'; c++)   /* shown bytes: control characters masked */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

/* The 1-based index of text in the reason table (claimed if new), 0 for
 * no text, or SRL_ENOSPC when the table is full. */
static int reason_index(struct srl__shm *s, const char *text)
{
    if (text == NULL || text[0] == '\0')
        return 0;
    char want[SRL__SHM_REASON_TEXT] = {0};
    strncpy(want, text, sizeof want - 1);
    struct srl__shm_reason *t = reason_table(s);
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned r = 0; r < SRL__SHM_REASONS; r++) {
            uint32_t st = __atomic_load_n(&t[r].state, __ATOMIC_ACQUIRE);
            if (st == SRL__OP_READY && memcmp(t[r].text, want, sizeof want) == 0)
                return (int)r + 1;
            uint32_t free = SRL__OP_FREE;
            if (pass == 1 && st == SRL__OP_FREE &&
                __atomic_compare_exchange_n(&t[r].state, &free, SRL__OP_BUSY, false,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                memcpy(t[r].text, want, sizeof want);
                __atomic_store_n(&t[r].state, SRL__OP_READY, __ATOMIC_RELEASE);
                return (int)r + 1;
            }
        }
    }
    return SRL_ENOSPC;
}

/* srl__shm_apply's function for an insert that decides nothing. */
static int insert_only(void *state, uint64_t now, void *ctx)
{
    (void)state, (void)now, (void)ctx;
    return 0;
}

/* Lock the bucket of key, inserting the key first when it is missing and
 * insert is set (an exemption or a ban of a key not seen yet).  A fresh
 * insert may be evicted as idle before it is locked again: tried a few
 * times. */
int srl__shm_locate_or_insert(struct srl__shm *s, const void *key, size_t len, bool insert,
                              uint64_t *b, int *i)
{
    struct srl__shm_key k;
    for (int tries = 0;; tries++) {
        int rc = srl__shm_locate(s, key, len, &k, b, i);
        if (rc != SRL_ENOENT || !insert || tries == 4)
            return rc;
        rc = srl__shm_apply(&s->lim, key, len, 1, insert_only, NULL);
        if (rc != 0 && rc != SRL_ENOENT)
            return rc;
    }
}

int srl__shm_key_control(srl_limiter *lim, const void *key, size_t len, int op, uint64_t for_ns,
                         const char *reason, srl_key_control *out)
{
    struct srl__shm *s = lim->impl;
    int r = 0;
    if (op == SRL__CTL_BAN && (r = reason_index(s, reason)) < 0)
        return r;
    uint64_t b;
    int i;
    bool insert = op == SRL__CTL_EXEMPT || op == SRL__CTL_BAN;
    int rc = srl__shm_locate_or_insert(s, key, len, insert, &b, &i);
    if (rc != 0)
        return rc;
    unsigned u = (unsigned)i;
    uint64_t now = srl__now(lim);
    const struct srl__shm_pol *p = srl__shm_pol_get(s, true);
    if (p == NULL) {
        srl__shm_unlock(s, b);
        return SRL_ECORRUPT;
    }
    /* The state as its policy reads it (converted if of the generation
     * before): a ",penalty=" ban and its offences live there. */
    const struct srl__compound *c = srl__shm_slot_current(s, p, b, u, now);   /* frozen */
    unsigned w = srl__shm_slot_tierword(s, b, u);   /* read once (shm.h) */
    unsigned char st[s->state_bytes] __attribute__((aligned(16)));   /* read once */
    srl__shm_state_load(s, b, u, st);
    if (op == SRL__CTL_GET) {
        memset(out, 0, sizeof *out);
        uint64_t until = SRL__SHM_ONCE(*srl__shm_slot_ban_until(s, b, u));
        /* current() reset a tier beyond the table; the word is read once,
         * and a writer could have stored since: checked again here. */
        out->tier = (w & SRL__SLOT_TIER_MASK) < p->tier_count ? (w & SRL__SLOT_TIER_MASK) : 0;
        if (w & SRL__SLOT_F_EXEMPT)
            out->flags |= SRL_KEY_EXEMPT;
        if (w & SRL__SLOT_F_OWN)
            out->flags |= SRL_KEY_OWN_LIMITS;
        if ((w & SRL__SLOT_F_BANNED) && until > now) {
            out->flags |= SRL_KEY_BANNED;
            out->ban_left_ns = until - now;
            char text[SRL__SHM_REASON_TEXT + 1];
            srl__shm_reason_text(s, SRL__SHM_ONCE(*srl__shm_slot_reason(s, b, u)), text);
            _Static_assert(sizeof out->reason >= SRL__SHM_REASON_TEXT, "a reason fits");
            memcpy(out->reason, text, sizeof out->reason - 1);
            out->reason[sizeof out->reason - 1] = '\0';
        }
        out->penalty_left_ns = srl__compound_banned_ns(c, st, now);
        if (out->penalty_left_ns != 0)
            out->flags |= SRL_KEY_PENALTY;
        out->repeat = srl__compound_offences(c, st, now);
        srl__shm_slot_thaw(s, b, u);
        srl__shm_unlock(s, b);
        return 0;
    }
    if (op == SRL__CTL_UNBAN && c->penalty) {
        /* The penalty's ban and offences too: the key starts again at MIN. */
        srl__shm_undo_begin(s, b, u);
        srl__compound_forgive(c, st);
        srl__shm_state_store(s, b, u, st);
        srl__shm_undo_end(s, b);
    }
    switch (op) {
    case SRL__CTL_EXEMPT:
        w |= SRL__SLOT_F_EXEMPT;
        break;
    case SRL__CTL_UNEXEMPT:
        w &= ~SRL__SLOT_F_EXEMPT;
        break;
    case SRL__CTL_BAN:
        w |= SRL__SLOT_F_BANNED;
        __atomic_store_n(srl__shm_slot_ban_until(s, b, u), now + for_ns, __ATOMIC_RELAXED);
        __atomic_store_n(srl__shm_slot_reason(s, b, u), (uint8_t)r, __ATOMIC_RELAXED);
        break;
    default:   /* SRL__CTL_UNBAN: the hand ban; the penalty's is forgiven above */
        w &= ~SRL__SLOT_F_BANNED;
        __atomic_store_n(srl__shm_slot_ban_until(s, b, u), 0, __ATOMIC_RELAXED);
        __atomic_store_n(srl__shm_slot_reason(s, b, u), 0, __ATOMIC_RELAXED);
        __atomic_store_n(srl__shm_slot_offence(s, b, u), 0, __ATOMIC_RELAXED);
        __atomic_store_n(srl__shm_slot_repeat(s, b, u), 0, __ATOMIC_RELAXED);
        break;
    }
    /* The tier word keeps its tier byte: only the flags change. */
    srl__shm_slot_tier_set(s, b, u, w, w);
    srl__shm_slot_thaw(s, b, u);
    srl__shm_gen_bump(s, b);
    srl__shm_unlock(s, b);
    return 0;
}
