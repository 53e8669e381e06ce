/*
 * proto.c - the policy protocol's reader and reply writer.
 *
 * Every byte comes from a peer and is untrusted.  Invariants: a line is at
 * most line_max bytes before its newline (the pending buffer holds
 * line_max + 1 bytes, so a line that does not end inside it is over the
 * bound), a request has at most attrs_max lines, and a read never waits past
 * its deadline (idle_timeout_ms for a request's first byte, then
 * request_timeout_ms for the whole request).  So memory per connection is
 * bounded by line_max * attrs_max and time by the two timeouts; nothing the
 * peer sends makes the reader block longer or allocate more.
 * No locks: one reader per connection, one thread.
 */
#include "proto.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int pd_reader_init(pd_reader *r, pd_fill_fn fill, void *ctx, uint32_t line_max,
                   uint32_t attrs_max, int idle_timeout_ms, int request_timeout_ms)
{
    memset(r, 0, sizeof *r);
    if (line_max < 1) line_max = 1;
    if (line_max > PD_LINE_MAX_LIMIT) line_max = PD_LINE_MAX_LIMIT;
    if (attrs_max < 1) attrs_max = 1;
    if (attrs_max > PD_ATTRS_MAX_LIMIT) attrs_max = PD_ATTRS_MAX_LIMIT;
    r->fill = fill;
    r->ctx = ctx;
    r->line_max = line_max;
    r->attrs_max = attrs_max;
    r->idle_timeout_ms = idle_timeout_ms;
    r->request_timeout_ms = request_timeout_ms;
    r->buf = malloc((size_t)line_max + 1);
    r->attrs = calloc(attrs_max, sizeof *r->attrs);
    r->store_cap = 4096;
    r->store = malloc(r->store_cap);
    if (r->buf == NULL || r->attrs == NULL || r->store == NULL) {
        pd_reader_free(r);
        return -1;
    }
    return 0;
}

void pd_reader_free(pd_reader *r)
{
    free(r->buf);
    free(r->attrs);
    free(r->store);
    r->buf = r->store = NULL;
    r->attrs = NULL;
}

int pd_utf8_valid(const char *s, size_t n, size_t *bad)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        unsigned cp, min;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; min = 0x80; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; min = 0x800; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; min = 0x10000; }
        else goto fail;
        if (n - i < len) goto fail;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) goto fail;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto fail;
        i += len;
    }
    return 1;
fail:
    if (bad != NULL) *bad = i;
    return 0;
}

/* Append one checked line to the request's store; its '=' splits it. */
static int store_line(pd_reader *r, const char *line, size_t len)
{
    if (r->store_len + len + 1 > r->store_cap) {
        size_t cap = r->store_cap;
        while (cap < r->store_len + len + 1) cap *= 2;
        char *s = realloc(r->store, cap);
        if (s == NULL) return -1;
        r->store = s;
        r->store_cap = cap;
    }
    memcpy(r->store + r->store_len, line, len);
    r->store[r->store_len + len] = '\0';
    char *eq = memchr(r->store + r->store_len, '=', len);
    *eq = '\0';
    /* Offsets now, pointers once the request is whole (the store may move). */
    r->attrs[r->count].name = (const char *)(uintptr_t)r->store_len;
    r->attrs[r->count].value = (const char *)(uintptr_t)(r->store_len + (size_t)(eq - (r->store + r->store_len)) + 1);
    r->store_len += len + 1;
    r->count++;
    return 0;
}

/* Check line (len bytes, no newline) of request line number lineno. */
static int check_line(const pd_reader *r, const char *line, size_t len, unsigned lineno,
                      char *why, size_t whylen)
{
    const char *nul = memchr(line, '\0', len);
    size_t bad;
    if (nul != NULL) {
        snprintf(why, whylen, "line %u: a NUL byte at column %zu (the protocol forbids NUL)",
                 lineno, (size_t)(nul - line) + 1);
        return PD_BAD_BYTE;
    }
    if (!pd_utf8_valid(line, len, &bad)) {
        snprintf(why, whylen, "line %u: byte 0x%02x at column %zu is not UTF-8", lineno,
                 (unsigned char)line[bad], bad + 1);
        return PD_BAD_BYTE;
    }
    const char *eq = memchr(line, '=', len);
    if (eq == NULL || eq == line) {
        snprintf(why, whylen, "line %u: expected name=value, got %s", lineno,
                 eq == NULL ? "no '='" : "an empty name");
        return PD_BAD_LINE;
    }
    if (r->count >= r->attrs_max) {
        snprintf(why, whylen, "more than %u attributes in one request (max_attributes)",
                 r->attrs_max);
        return PD_TOO_MANY;
    }
    return PD_OK;
}

int pd_read_request(pd_reader *r, char *why, size_t whylen)
{
    unsigned lineno = 0;
    int started = 0;
    uint64_t deadline = 0;
    r->count = 0;
    r->store_len = 0;
    why[0] = '\0';
    if (r->have > 0) { /* the next request's bytes came with the last one's */
        started = 1;
        deadline = now_ms() + (uint64_t)(r->request_timeout_ms < 0 ? 0 : r->request_timeout_ms);
    }
    for (;;) {
        char *nl = memchr(r->buf, '\n', r->have);
        if (nl != NULL) {
            size_t len = (size_t)(nl - r->buf);
            lineno++;
            if (len == 0) {
                memmove(r->buf, r->buf + 1, r->have - 1);
                r->have--;
                if (r->count == 0) {
                    snprintf(why, whylen, "an empty request (no attributes before the empty line)");
                    return PD_BAD_LINE;
                }
                for (uint32_t i = 0; i < r->count; i++) {
                    r->attrs[i].name = r->store + (uintptr_t)r->attrs[i].name;
                    r->attrs[i].value = r->store + (uintptr_t)r->attrs[i].value;
                }
                return PD_OK;
            }
            int st = check_line(r, r->buf, len, lineno, why, whylen);
            if (st != PD_OK) return st;
            if (store_line(r, r->buf, len) != 0) {
                snprintf(why, whylen, "out of memory");
                return PD_IO;
            }
            memmove(r->buf, nl + 1, r->have - len - 1);
            r->have -= len + 1;
            continue;
        }
        if (r->have > r->line_max) {
            snprintf(why, whylen, "line %u: longer than %u bytes (max_line)", lineno + 1,
                     r->line_max);
            return PD_TOO_LONG;
        }
        int timeout;
        if (!started) {
            timeout = r->idle_timeout_ms;
        } else {
            uint64_t t = now_ms();
            timeout = t >= deadline ? 0 : (int)(deadline - t);
        }
        ssize_t n = r->fill(r->ctx, r->buf + r->have, (size_t)r->line_max + 1 - r->have, timeout);
        if (n == -2) {
            if (!started && r->have == 0) {
                snprintf(why, whylen, "idle for %d ms without a request", r->idle_timeout_ms);
                return PD_IDLE;
            }
            snprintf(why, whylen, "no empty line within %d ms of the request's first byte "
                         "(read %u lines)", r->request_timeout_ms, lineno);
            return PD_TIMEOUT;
        }
        if (n < 0) {
            snprintf(why, whylen, "read: %s", strerror(errno));
            return PD_IO;
        }
        if (n == 0) {
            if (!started && r->have == 0) return PD_EOF;
            snprintf(why, whylen, "the peer closed inside a request (after %u lines, no empty line)",
                     lineno);
            return PD_TRUNCATED;
        }
        if (!started) {
            started = 1;
            deadline = now_ms() + (uint64_t)(r->request_timeout_ms < 0 ? 0 : r->request_timeout_ms);
        }
        r->have += (size_t)n;
    }
}

const char *pd_get(const pd_reader *r, const char *name)
{
    for (uint32_t i = 0; i < r->count; i++)
        if (strcmp(r->attrs[i].name, name) == 0) return r->attrs[i].value;
    return NULL;
}

ssize_t pd_fill_fd(void *ctx, char *buf, size_t len, int timeout_ms)
{
    int fd = *(int *)ctx;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        int rc = poll(&p, 1, timeout_ms);
        if (rc == 0) return -2;
        if (rc < 0) {
            if (errno == EINTR) return -2; /* a signal: stop waiting (SIGTERM) */
            return -1;
        }
        ssize_t n = read(fd, buf, len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        return n;
    }
}

ssize_t pd_fill_mem(void *ctx, char *buf, size_t len, int timeout_ms)
{
    pd_mem *m = ctx;
    (void)timeout_ms;
    size_t n = m->len - m->off;
    if (n > len) n = len;
    if (n > m->chunk) n = m->chunk;
    memcpy(buf, m->data + m->off, n);
    m->off += n;
    return (ssize_t)n;
}

int pd_write_action(int fd, const char *action)
{
    char out[1024];
    int n = snprintf(out, sizeof out, "action=%s\n\n", action);
    if (n < 0 || (size_t)n >= sizeof out) return -1;
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, out + off, (size_t)n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return 0;
}
