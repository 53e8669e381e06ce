/*
 * rlctl_escape.c - keys and other untrusted bytes made safe to print.
 *
 * Keys are chosen by clients (an API key, a user name, a header value), so
 * they may hold anything: bytes that are not text, or terminal escape
 * sequences that would recolour, retitle or rewrite the operator's screen.
 * Nothing rlctl prints carries such bytes raw.  The escaped form:
 *   - printable ASCII 0x20..0x7e is kept, except '\' -> "\\" and '"' -> "\"";
 *   - every other byte (controls, DEL, 0x80..0xff) -> "\xNN", two lowercase
 *     hex digits.
 * It is reversible (each escape is unambiguous), pure printable ASCII (so
 * it is also valid inside JSON after JSON's own escaping), and at most 4
 * bytes per input byte.
 *
 * No state; every function returns a malloc'd string the caller frees.
 */
#include "rlctl.h"

#include <stdlib.h>
#include <string.h>

static const char hexdigits[] = "0123456789abcdef";

char *rlctl_escape(const unsigned char *s, size_t n)
{
    char *out = malloc(4 * n + 1);
    if (out == NULL)
        return NULL;
    char *p = out;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c == '\\' || c == '"') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c >= 0x20 && c <= 0x7e) {
            *p++ = (char)c;
        } else {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = hexdigits[c >> 4];
            *p++ = hexdigits[c & 15];
        }
    }
    *p = '\0';
    return out;
}

char *rlctl_hex(const unsigned char *s, size_t n)
{
    char *out = malloc(2 * n + 1);
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hexdigits[s[i] >> 4];
        out[2 * i + 1] = hexdigits[s[i] & 15];
    }
    out[2 * n] = '\0';
    return out;
}

char *rlctl_key_label(const srl_entry *e)
{
    if (e->display_len == 0) {
        char *fp = rlctl_hex(e->fingerprint, sizeof e->fingerprint);
        if (fp == NULL)
            return NULL;
        char *out = malloc(strlen(fp) + sizeof "<fingerprint >");
        if (out != NULL)
            sprintf(out, "<fingerprint %s>", fp);
        free(fp);
        return out;
    }
    char *esc = rlctl_escape(e->display, e->display_len);
    if (esc == NULL || e->display_len >= e->key_len)
        return esc;
    /* A display copy shorter than the key: mark the cut. */
    size_t n = strlen(esc);
    char *out = realloc(esc, n + 4);
    if (out == NULL) {
        free(esc);
        return NULL;
    }
    memcpy(out + n, "...", 4);
    return out;
}
