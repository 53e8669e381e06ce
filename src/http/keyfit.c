/*
 * keyfit.c - srl_key_fit: the one rule every binding applies to a key
 * longer than SRL_KEY_MAX.
 *
 * WHAT IT HOLDS
 *   A key of 1..SRL_KEY_MAX bytes is itself.  A longer one becomes its
 *   fitted form, exactly SRL_KEY_MAX bytes:
 *       its first SRL_KEY_MAX - FIT_HASH bytes, then
 *       BLAKE2b-256 of the whole key (libsodium's crypto_generichash,
 *       unkeyed, FIT_HASH = 32 bytes).
 *   The kept head makes the display copy (rlctl list) show the key's start;
 *   the hash of every byte makes two long keys that differ anywhere map to
 *   two fitted keys (up to a BLAKE2b-256 collision).
 *
 * INVARIANTS
 *   - Deterministic: no secret, no seed, no per-process or per-host state,
 *     so every worker, every host of a fleet and every binding (mod_srl,
 *     nginx, Python, PHP) maps a key to the same fitted key and so to the
 *     same count.  Changing FIT_HASH, the hash or the head is a change of
 *     every stored long key's identity: the fixed vector of
 *     tests/check_keyfit.c holds it.
 *   - A fitted key is SRL_KEY_MAX bytes, itself a valid key.  It may equal
 *     a client's own SRL_KEY_MAX-byte key only if that client sent the
 *     head and the hash of the long key: it could as well have sent the
 *     long key, so this gives no one a count they could not reach anyway.
 *   - An empty key has no fitted form (NULL): whether it is limited is the
 *     caller's rule (the middlewares leave such requests unlimited).
 *
 * LOCKS  none.  MAY TOUCH  buf and *len only.
 */
#include "srl.h"

#include <sodium.h>
#include <string.h>

#define FIT_HASH 32u   /* BLAKE2b-256 */
_Static_assert(FIT_HASH == crypto_generichash_BYTES, "the fitted key's hash is BLAKE2b-256");
_Static_assert(FIT_HASH < SRL_KEY_MAX, "a fitted key keeps a head");

const void *srl_key_fit(const void *key, size_t *len, unsigned char buf[SRL_KEY_MAX])
{
    if (len == NULL || *len == 0 || key == NULL)
        return NULL;
    if (*len <= SRL_KEY_MAX)
        return key;
    if (buf == NULL)
        return NULL;
    /* BLAKE2b's portable code needs no sodium_init (it only picks a faster
     * implementation of the same function); crypto_generichash fails only
     * for out-of-range sizes, which these are not. */
    unsigned char h[FIT_HASH];
    if (crypto_generichash(h, sizeof h, key, *len, NULL, 0) != 0)
        return NULL;
    memcpy(buf, key, SRL_KEY_MAX - FIT_HASH);
    memcpy(buf + SRL_KEY_MAX - FIT_HASH, h, FIT_HASH);
    *len = SRL_KEY_MAX;
    return buf;
}
