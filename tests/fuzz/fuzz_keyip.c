/*
 * fuzz_keyip.c - libFuzzer target: srl_key_ip, srl_cidr_parse,
 * srl_cidr_match and srl_cidr_format (src/http/keyip.c) on arbitrary text.
 *
 * Input: byte 0 the IPv4 prefix (mod 34: 33 is out of range), byte 1 the
 * IPv6 prefix (mod 130), the rest the text (as a C string, so a NUL in it
 * ends it as it would for a caller).
 * Invariants checked (abort on violation, which libFuzzer reports):
 *   - every call returns a length, 0/1 or SRL_EINVAL / SRL_ENOBUFS, and
 *     on an error writes nothing (buffers and *out poisoned beforehand);
 *   - a key is shorter than SRL_KEY_IP_MAX, NUL-terminated, parses as a
 *     range of its address's family that the address matches, and formats
 *     back to the same bytes;
 *   - srl_key_ip_form of the text: 0 with prefixes in range that print
 *     back ("/V4,/V6") to a text it reads the same, or SRL_EINVAL with
 *     both outputs unchanged;
 *   - an accepted range is zero beyond its family's bytes and its prefix,
 *     formats to a text that parses to the same bytes, contains its own
 *     network address, and srl_key_ip of that address at its prefix is the
 *     same text (one form for keys and ranges).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "srl.h"

static void check_key(const char *text, unsigned v4, unsigned v6)
{
    char buf[SRL_KEY_IP_MAX + 16];
    memset(buf, 0x5a, sizeof buf);
    int n = srl_key_ip(text, v4, v6, buf, SRL_KEY_IP_MAX);
    if (n < 0) {
        if (n != SRL_EINVAL)
            abort();
        for (size_t i = 0; i < sizeof buf; i++)
            if (buf[i] != 0x5a)
                abort();
        if (v4 <= 32 && v6 <= 128 && strchr(text, '/') == NULL
            && srl_cidr_parse(text, &(srl_cidr){0}) == 0)
            abort();   /* a bare address srl_cidr_parse takes is an address */
        return;
    }
    if (n == 0 || n >= SRL_KEY_IP_MAX || buf[n] != '\0' || strlen(buf) != (size_t)n)
        abort();
    for (size_t i = (size_t)n + 1; i < sizeof buf; i++)
        if (buf[i] != 0x5a)
            abort();
    srl_cidr c;
    if (srl_cidr_parse(buf, &c) != 0)
        abort();
    if (c.prefix != (c.family == 4 ? v4 : v6))
        abort();
    if (srl_cidr_match(&c, text) != 1)
        abort();
    char again[SRL_KEY_IP_MAX];
    if (srl_cidr_format(&c, again, sizeof again) != n || strcmp(again, buf) != 0)
        abort();
    /* One byte short: refused, nothing written. */
    memset(again, 0x5a, sizeof again);
    if (srl_key_ip(text, v4, v6, again, (size_t)n) != SRL_ENOBUFS || again[0] != 0x5a)
        abort();
}

static void check_cidr(const char *text)
{
    srl_cidr c, before;
    memset(&c, 0xa5, sizeof c);
    before = c;
    int rc = srl_cidr_parse(text, &c);
    if (rc != 0) {
        if (rc != SRL_EINVAL || memcmp(&c, &before, sizeof c) != 0)
            abort();
        return;
    }
    unsigned bytes = c.family == 4 ? 4 : c.family == 6 ? 16 : 0;
    if (bytes == 0 || c.prefix > 8 * bytes)
        abort();
    for (unsigned i = 0; i < 16; i++) {
        unsigned lo = 8 * i;
        unsigned char keep = c.prefix >= lo + 8 ? 0xff
                             : c.prefix > lo   ? (unsigned char)(0xff << (8 - (c.prefix - lo)))
                                               : 0;
        if (i >= bytes)
            keep = 0;
        if ((c.addr[i] & (unsigned char)~keep) != 0)
            abort();
    }
    char a[SRL_KEY_IP_MAX], b[SRL_KEY_IP_MAX];
    int n = srl_cidr_format(&c, a, sizeof a);
    if (n <= 0 || n >= SRL_KEY_IP_MAX)
        abort();
    srl_cidr d;
    if (srl_cidr_parse(a, &d) != 0 || memcmp(&c, &d, sizeof c) != 0)
        abort();
    char *slash = strchr(a, '/');
    if (slash == NULL)
        abort();
    *slash = '\0';
    if (srl_cidr_match(&c, a) != 1)
        abort();
    if (srl_key_ip(a, c.family == 4 ? c.prefix : 32u, c.family == 6 ? c.prefix : 128u, b, sizeof b)
        != n)
        abort();
    *slash = '/';
    if (strcmp(a, b) != 0)
        abort();
}

static void check_form(const char *text, size_t len)
{
    unsigned v4 = 999, v6 = 999;
    int rc = srl_key_ip_form(text, len, &v4, &v6);
    if (rc != 0) {
        if (rc != SRL_EINVAL || v4 != 999 || v6 != 999)
            abort();
        return;
    }
    if (v4 > 32 || v6 > 128)
        abort();
    char again[32];
    int n = snprintf(again, sizeof again, "/%u,/%u", v4, v6);
    unsigned a = 999, b = 999;
    if (srl_key_ip_form(again, (size_t)n, &a, &b) != 0 || a != v4 || b != v6)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned v4 = data[0] % 34u, v6 = data[1] % 130u;
    char *text = fuzz_cstring(data + 2, size - 2);
    if (text == NULL)
        return 0;
    check_key(text, v4, v6);
    check_cidr(text);
    check_form((const char *)data + 2, size - 2);   /* raw bytes: len bounds it */
    srl_cidr ten;
    if (srl_cidr_parse("10.0.0.0/8", &ten) != 0)
        abort();
    int m = srl_cidr_match(&ten, text);
    if (m != 0 && m != 1 && m != SRL_EINVAL)
        abort();
    free(text);
    return 0;
}
