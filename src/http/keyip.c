/*
 * keyip.c - client addresses as keys: srl_key_ip (an address's prefix as
 * a canonical text key) and srl_cidr_parse / srl_cidr_match (address
 * ranges, for exemptions), the one parser every binding uses.
 *
 * WHAT IT HOLDS
 *   An address is text, parsed by inet_pton (dotted quad without leading
 *   zeros; RFC 4291 IPv6 text, no zone "%eth0", no brackets).  An
 *   IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address: a
 *   dual-stack listener sees IPv4 clients so, and they must share the
 *   counts and the exemptions of the same client seen over IPv4.
 *   Keys are written by fmt6/fmt4 below, not inet_ntop, so every libc and
 *   every binding produce the same bytes: IPv4 dotted decimal, IPv6 in
 *   RFC 5952 form (lower-case hex, no leading zeros, the longest run of
 *   two or more zero groups, the first on a tie, as "::", never dotted),
 *   then "/prefix" always, even /32 and /128.
 *
 * INVARIANTS
 *   - A key is at most SRL_KEY_IP_MAX - 1 bytes ("ffff:...:ffff/128" is
 *     39 + 4); on any error nothing is written to buf or *out.
 *   - Input text is read up to its NUL or ADDR_TEXT_MAX bytes, no further.
 *
 * LOCKS  none.  MAY TOUCH  buf / *out only.
 */
#include "srl.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Longer than any address text inet_pton accepts (45 for the mapped form). */
#define ADDR_TEXT_MAX 64u

/* Parse addr into 16 bytes; *v4 = 1 for IPv4, 2 for IPv4-mapped IPv6
 * (bytes 0..3 hold the IPv4 address, the rest zero), 0 for IPv6.
 * 0 or SRL_EINVAL. */
static int parse_addr(const char *addr, size_t n, unsigned char a[16], int *v4)
{
    char text[ADDR_TEXT_MAX + 1];
    if (n == 0 || n > ADDR_TEXT_MAX)
        return SRL_EINVAL;
    memcpy(text, addr, n);
    text[n] = '\0';
    memset(a, 0, 16);
    if (inet_pton(AF_INET, text, a) == 1) {
        *v4 = 1;
        return 0;
    }
    if (inet_pton(AF_INET6, text, a) != 1)
        return SRL_EINVAL;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    *v4 = memcmp(a, mapped, sizeof mapped) == 0 ? 2 : 0;
    if (*v4) {
        memmove(a, a + 12, 4);
        memset(a + 4, 0, 12);
    }
    return 0;
}

static int text_addr(const char *addr, unsigned char a[16], int *v4)
{
    if (addr == NULL)
        return SRL_EINVAL;
    size_t n = strnlen(addr, ADDR_TEXT_MAX + 1);
    return parse_addr(addr, n, a, v4);
}

/* Keep the first bits bits of a (nbytes long), zero the rest. */
static void mask(unsigned char *a, size_t nbytes, unsigned bits)
{
    for (size_t i = 0; i < nbytes; i++) {
        unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * (unsigned)i : 0;
        a[i] &= (unsigned char)(0xffu << (8 - keep));
    }
}

static int fmt4(const unsigned char a[4], char *out)
{
    return sprintf(out, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
}

static int fmt6(const unsigned char a[16], char *out)
{
    unsigned w[8];
    int best = -1, best_len = 0;
    for (int i = 0; i < 8; i++)
        w[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
    for (int i = 0; i < 8;) {
        int j = i;
        while (j < 8 && w[j] == 0)
            j++;
        if (j - i > best_len && j - i >= 2) {
            best = i;
            best_len = j - i;
        }
        i = j > i ? j : i + 1;
    }
    char *p = out;
    for (int i = 0; i < 8; i++) {
        if (i == best) {
            p += sprintf(p, "::");
            i += best_len - 1;
            continue;
        }
        if (i > 0 && i != best + best_len)
            *p++ = ':';
        p += sprintf(p, "%x", w[i]);
    }
    *p = '\0';
    return (int)(p - out);
}

/* The key text of a (already masked) and prefix into buf; nothing written
 * unless it fits with its NUL.  The length, or SRL_ENOBUFS. */
static int put_key(const unsigned char a[16], int v4, unsigned prefix, char *buf, size_t len)
{
    char key[SRL_KEY_IP_MAX + 8];
    int n = v4 ? fmt4(a, key) : fmt6(a, key);
    n += sprintf(key + n, "/%u", prefix);
    if ((size_t)n >= len)
        return SRL_ENOBUFS;
    memcpy(buf, key, (size_t)n + 1);
    return n;
}

int srl_key_ip(const char *addr, unsigned v4_prefix, unsigned v6_prefix, char *buf, size_t len)
{
    unsigned char a[16];
    int v4;
    if (buf == NULL || text_addr(addr, a, &v4) != 0 || v4_prefix > 32 || v6_prefix > 128)
        return SRL_EINVAL;
    unsigned prefix = v4 ? v4_prefix : v6_prefix;
    mask(a, v4 ? 4 : 16, prefix);
    return put_key(a, v4, prefix, buf, len);
}

int srl_cidr_parse(const char *text, srl_cidr *out)
{
    if (text == NULL || out == NULL)
        return SRL_EINVAL;
    size_t n = strnlen(text, ADDR_TEXT_MAX + 5);
    const char *slash = memchr(text, '/', n);
    size_t alen = slash != NULL ? (size_t)(slash - text) : n;
    unsigned char a[16];
    int v4;
    if (parse_addr(text, alen, a, &v4) != 0)
        return SRL_EINVAL;
    /* A mapped range counts as the IPv4 range it holds, so its prefix
     * loses the 96 bits of the mapping prefix. */
    int mapped = v4 == 2;
    unsigned max = v4 ? (mapped ? 128 : 32) : 128, prefix = max;
    if (slash != NULL) {
        const char *p = slash + 1;
        size_t plen = n - alen - 1;
        if (plen == 0 || plen > 3 || (plen > 1 && p[0] == '0'))
            return SRL_EINVAL;
        prefix = 0;
        for (size_t i = 0; i < plen; i++) {
            if (p[i] < '0' || p[i] > '9')
                return SRL_EINVAL;
            prefix = prefix * 10 + (unsigned)(p[i] - '0');
        }
        if (prefix > max || (mapped && prefix < 96))
            return SRL_EINVAL;
    }
    if (n > ADDR_TEXT_MAX + 4)
        return SRL_EINVAL;
    if (mapped)
        prefix -= 96;
    /* Host bits set ("10.0.0.1/8") is refused: it is a typo as often as
     * not, and which range was meant cannot be told. */
    unsigned char m[16];
    memcpy(m, a, 16);
    mask(m, v4 ? 4 : 16, prefix);
    if (memcmp(m, a, 16) != 0)
        return SRL_EINVAL;
    memset(out, 0, sizeof *out);
    out->family = v4 ? 4 : 6;
    out->prefix = (uint8_t)prefix;
    memcpy(out->addr, a, 16);
    return 0;
}

int srl_cidr_match(const srl_cidr *c, const char *addr)
{
    unsigned char a[16];
    int v4;
    if (c == NULL || (c->family != 4 && c->family != 6) || c->prefix > (c->family == 4 ? 32 : 128)
        || text_addr(addr, a, &v4) != 0)
        return SRL_EINVAL;
    if ((c->family == 4) != (v4 != 0))
        return 0;
    mask(a, v4 ? 4 : 16, c->prefix);
    return memcmp(a, c->addr, 16) == 0;
}

int srl_cidr_format(const srl_cidr *c, char *buf, size_t len)
{
    if (c == NULL || buf == NULL || (c->family != 4 && c->family != 6)
        || c->prefix > (c->family == 4 ? 32 : 128))
        return SRL_EINVAL;
    return put_key(c->addr, c->family == 4, c->prefix, buf, len);
}
