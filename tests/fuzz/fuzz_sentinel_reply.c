/*
 * fuzz_sentinel_reply.c - libFuzzer target: srl__sentinel_parse
 * (src/redis/redis_sentinel.c), the parser of a sentinel's reply to SENTINEL
 * get-master-addr-by-name, on any bytes, whole and fed in two parts.
 *
 * Invariants checked (abort on violation):
 *   - it returns 0, 1 (incomplete), SRL_ENOENT or SRL_ESYS, and 1 only for
 *     an input shorter than SRL__SENTINEL_REPLY_MAX;
 *   - on 0 the host is 1..255 bytes of [A-Za-z0-9._:-], NUL-terminated, and
 *     the port 1..65535; on SRL_ESYS why[] is a NUL-terminated sentence;
 *   - a complete answer (not 1) is the same for every prefix it was read
 *     in: a prefix of it is incomplete or gives that answer already.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "redis_sentinel.h"
#include "srl.h"

static int check(const char *s, size_t n, char host[256], int *port)
{
    char why[200];
    memset(host, 0x5a, 256);
    why[0] = '\0';
    int rc = srl__sentinel_parse(s, n, host, port, why, sizeof why);
    if (rc != 0 && rc != 1 && rc != SRL_ENOENT && rc != SRL_ESYS)
        abort();
    if (rc == 1 && n >= SRL__SENTINEL_REPLY_MAX)
        abort();
    if (rc == SRL_ESYS && (memchr(why, '\0', sizeof why) == NULL || why[0] == '\0'))
        abort();
    if (rc == 0) {
        size_t hl = strnlen(host, 256);
        if (hl == 0 || hl == 256 || *port < 1 || *port > 65535)
            abort();
        for (size_t i = 0; i < hl; i++)
            if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-",
                       host[i]) == NULL)
                abort();
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *s = (const char *)data;
    char host[256], h2[256];
    int port = 0, p2 = 0;
    int rc = check(s, size, host, &port);
    for (size_t cut = 0; cut < size && rc != 1; cut++) {
        int r = check(s, cut, h2, &p2);
        if (r == 1)
            continue;
        /* an answer from a prefix: the reader stops there, so the whole
         * input would never be read; it must not be a different success */
        if (r == 0 && rc == 0 && (p2 != port || strcmp(h2, host) != 0))
            abort();
        break;
    }
    return 0;
}
