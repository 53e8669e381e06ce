/*
 * fuzz_conc_reply.c - libFuzzer target: srl__conc_reply
 * (src/redis/redis_lease.c), the check of concurrency.lua's enter or peek
 * reply, on a reply tree built from any bytes.
 *
 * Input: byte 0 N = 1 + b % 8 (the policy's units), byte 1 bit 0 peek;
 * then elements, each a tag byte: tag % 4 = 0 an integer (8 bytes, little
 * endian), 1 a string (a length byte % 72, then that many bytes), 2 a nil,
 * 3 a nested empty array; at most 16.  The top is an array of them, or,
 * for an input of 2 bytes or fewer, an integer.
 *
 * Invariants checked (abort on violation):
 *   - it returns 0 or 1; on 0 *d and *gen are untouched and dead[] is
 *     still empty;
 *   - on 1: d.limit = N, remaining < N, retry_after and reset_after at
 *     most the lease time; admitted: retry_after 0 and (not peek) gen != 0;
 *     denied: retry_after > 0, gen 0, remaining 0 but for peek; peek: gen 0;
 *   - dead[] is NUL-terminated within its size, decimal numbers joined by
 *     single spaces, each the GEN of one of the reply's holder texts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fuzz_input.h"
#include "redis_lease.h"
#include "srl.h"

#define LEASE_NS 60000000000ull

static void tree_free(redisReply *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->elements; i++)
        tree_free(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

static redisReply *node(int type)
{
    redisReply *r = calloc(1, sizeof *r);
    if (r == NULL)
        abort();
    r->type = type;
    return r;
}

/* Is g (digits [b, e)) the GEN of one of rep's holder strings? */
static int names_holder(const redisReply *rep, const char *b, size_t n)
{
    for (size_t i = 5; i < rep->elements; i++) {
        const redisReply *h = rep->element[i];
        if (h->type == REDIS_REPLY_STRING && h->len > n && memcmp(h->str, b, n) == 0 &&
            h->str[n] == ' ')
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 2)
        return 0;
    uint32_t n = 1 + data[0] % 8;
    int peek = data[1] & 1;
    size_t at = 2;
    redisReply *top;
    if (size == 2) {
        top = node(REDIS_REPLY_INTEGER);
    } else {
        top = node(REDIS_REPLY_ARRAY);
        top->element = calloc(16, sizeof *top->element);
        if (top->element == NULL)
            abort();
        while (at < size && top->elements < 16) {
            unsigned tag = data[at++] % 4;
            redisReply *e;
            if (tag == 0) {
                e = node(REDIS_REPLY_INTEGER);
                uint64_t v = 0;
                for (int i = 0; i < 8 && at < size; i++)
                    v |= (uint64_t)data[at++] << (8 * i);
                e->integer = (long long)v;
            } else if (tag == 1) {
                e = node(REDIS_REPLY_STRING);
                size_t len = at < size ? data[at++] % 72 : 0;
                if (len > size - at)
                    len = size - at;
                e->str = malloc(len + 1);
                if (e->str == NULL)
                    abort();
                memcpy(e->str, data + at, len);
                e->str[len] = '\0';
                e->len = len;
                at += len;
            } else {
                e = node(tag == 2 ? REDIS_REPLY_NIL : REDIS_REPLY_ARRAY);
            }
            top->element[top->elements++] = e;
        }
    }
    srl_decision d, d0;
    memset(&d, 0x5a, sizeof d);
    d0 = d;
    uint32_t gen = 0xdeadbeef;
    char dead[64];
    memset(dead, 0x5a, sizeof dead);
    dead[0] = '\0';
    int rc = srl__conc_reply(top, n, LEASE_NS, peek, &d, &gen, dead, sizeof dead);
    if (rc != 0 && rc != 1)
        abort();
    if (rc == 0 && (memcmp(&d, &d0, sizeof d) != 0 || gen != 0xdeadbeef || dead[0] != '\0'))
        abort();
    if (rc == 1) {
        if (d.limit != n || d.remaining >= n || d.retry_after_ns > LEASE_NS ||
            d.reset_after_ns > LEASE_NS)
            abort();
        if (d.allowed && (d.retry_after_ns != 0 || (!peek && gen == 0)))
            abort();
        if (!d.allowed && ((!peek && d.remaining != 0) || d.retry_after_ns == 0 || gen != 0))
            abort();
        if (peek && gen != 0)
            abort();
        const char *end = memchr(dead, '\0', sizeof dead);
        if (end == NULL)
            abort();
        for (const char *p = dead; p < end;) {
            const char *b = p;
            while (p < end && *p >= '0' && *p <= '9')
                p++;
            if (p == b || !names_holder(top, b, (size_t)(p - b)))
                abort();
            if (p < end && (*p != ' ' || p + 1 == end))
                abort();
            if (p < end)
                p++;
        }
    }
    tree_free(top);
    return 0;
}
