/*
 * local_lockfree.c - the in-process store's lock-free GCRA state word
 * (SRL_CONFIG_LOCKFREE; l->lockfree).  The decision on the word,
 * word_update, is in local_store.h, static inline: it is on srl_acquire's path,
 * inlined into local_decide.  Here: its design, retirement
 * (srl__local_word_retire) and the atomic copy of a state
 * (srl__local_state_copy).
 *
 * WHAT IT IS
 *   On a handle whose policy is one GCRA limit (no ban word, not dry run)
 *   the state is one 64-bit word, the TAT, and srl_acquire on a node found
 *   (or just created) is one compare-and-swap from the value it decided on
 *   (word_update): no node lock, nothing to undo, a denial writes nothing.
 *
 * INVARIANTS, and why a CAS never lands where it must not
 *   - Reuse: the decider found the node through the index inside its
 *     read-side section, and a node goes back to the pool only from its
 *     call_rcu callback, after a grace period that began after its entry
 *     was cleared.  So until the decider's section ends the node holds this
 *     key's state or this key's retired state, never another key's.
 *   - Retirement: reset, eviction and reclamation CAS the word to
 *     WORD_TOMB (srl__local_word_retire) under the node's lock, eviction
 *     only from a value at rest, and then mark the node DEAD.  WORD_TOMB
 *     is never a TAT and is never overwritten before reuse, so a decider's
 *     CAS from any TAT fails once the state is retired; the decider then
 *     takes the locked path, sees DEAD and looks the key up again (the
 *     closed eviction race, as for locked deciders).  An eviction that
 *     loses its CAS to a decider re-reads the word and finds it no longer
 *     at rest.
 *   - Every other write of the word after publication is a CAS too, made
 *     under the node's lock (srl_reserve with a wait, srl_refund, the
 *     first decision of a new key only if it comes through the locked
 *     path), and every read is atomic (peek, key_state, foreach): the
 *     lock still orders those against retirement, not against deciders.
 *   - Counts: a decider counts inside its read-side section, so after the
 *     node's grace period no count can arrive; free_node_rcu
 *     (local_index.c) moves the counts then.  An admission on x86-64
 *     (l->lf_pair) counts in its CAS: {allowed, word} is one 16-byte pair
 *     (cas16.h), one locked instruction where a CAS and an add were two;
 *     every other decision counts with an atomic add after it.  Stats are
 *     exact once the deciders have returned, whatever was retired
 *     meanwhile.
 *   Not lock-free (the lock as before): srl_enter, srl_reserve with a
 *   wait, srl_refund, srl_peek, key_state, every other policy.
 *
 * MAY TOUCH
 *   A node's state word, atomically only, and (the pair CAS, word_update)
 *   its allowed count beside it; nothing else of the node.
 */
#include "local_store.h"

/* Retire n's word: CAS in WORD_TOMB, if only_at_rest only from a value at
 * rest at now.  True if retired.  Call with n's lock held, n not dead (so
 * the word is not WORD_TOMB); the caller then marks n dead. */
bool srl__local_word_retire(struct local *l, struct lnode *n, uint64_t now, bool only_at_rest)
{
    uint64_t *w = node_word(n);
    uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
    do {
        if (only_at_rest && !srl__compound_at_rest(&l->lim.cmp, &old, now))
            return false;
    } while (!__atomic_compare_exchange_n(w, &old, WORD_TOMB, false, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return true;
}

/* A copy of n's state as one read sees it (atomic on a lock-free handle,
 * whose word may change under the lock).  Call with n's lock held. */
void srl__local_state_copy(const struct local *l, struct lnode *n, void *buf)
{
    if (l->lockfree) {
        uint64_t v = __atomic_load_n(node_word(n), __ATOMIC_RELAXED);
        memcpy(buf, &v, sizeof v);
    } else {
        memcpy(buf, node_state(n), l->state_bytes);
    }
}
