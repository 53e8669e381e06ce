/*
 * proto.h - Postfix's SMTP access policy delegation protocol, the server
 * side: read one request (name=value lines ended by an empty line) within
 * bounds, write one reply ("action=...\n\n").
 */
#ifndef SRL_POLICYD_PROTO_H
#define SRL_POLICYD_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PD_LINE_MAX_LIMIT 65536u  /* largest max_line a config may set */
#define PD_ATTRS_MAX_LIMIT 1024u  /* largest max_attributes */

/* Where the reader's bytes come from: fill reads at most len bytes into buf,
 * waiting at most timeout_ms; returns the count, 0 at end of input, -1 on
 * an error, -2 when the time ran out. */
typedef ssize_t (*pd_fill_fn)(void *ctx, char *buf, size_t len, int timeout_ms);

typedef struct pd_attr {
    const char *name;
    const char *value;
} pd_attr;

typedef struct pd_reader {
    pd_fill_fn fill;
    void *ctx;
    uint32_t line_max;        /* longest line, bytes, without its newline */
    uint32_t attrs_max;       /* most attribute lines in one request */
    int idle_timeout_ms;      /* wait for a request's first byte */
    int request_timeout_ms;   /* from its first byte to its empty line */
    char *buf;                /* line_max + 1 bytes of pending input */
    size_t have;              /* bytes in buf */
    char *store;              /* the request's lines, NUL-terminated */
    size_t store_len, store_cap;
    pd_attr *attrs;
    uint32_t count;
} pd_reader;

enum pd_status {
    PD_OK = 0,        /* a request: attrs[0..count) */
    PD_EOF,           /* the peer closed between requests */
    PD_TIMEOUT,       /* no empty line in time (or idle too long) */
    PD_TOO_LONG,      /* a line over line_max */
    PD_TOO_MANY,      /* over attrs_max lines */
    PD_BAD_BYTE,      /* a NUL or a byte that is not UTF-8 */
    PD_BAD_LINE,      /* a line without '=' or with an empty name */
    PD_TRUNCATED,     /* the peer closed inside a request */
    PD_IO,            /* a read error */
    PD_IDLE           /* no request began within idle_timeout_ms */
};

/* 0, or -1 when out of memory.  Bounds are clamped to the limits above. */
int pd_reader_init(pd_reader *r, pd_fill_fn fill, void *ctx, uint32_t line_max,
                   uint32_t attrs_max, int idle_timeout_ms, int request_timeout_ms);
void pd_reader_free(pd_reader *r);

/* Read one request.  On anything but PD_OK, why says what was wrong in
 * words for the log (the offending line number and byte, never the raw
 * bytes), and the connection should be answered and closed: the input's
 * framing can no longer be trusted. */
int pd_read_request(pd_reader *r, char *why, size_t whylen);

/* The value of attribute name in the last request (the first if sent twice),
 * or NULL if it was not sent. */
const char *pd_get(const pd_reader *r, const char *name);

/* The fd source: poll(2) then read(2); ctx points at the int fd. */
ssize_t pd_fill_fd(void *ctx, char *buf, size_t len, int timeout_ms);

/* The memory source: ctx points at a pd_mem; each fill hands out at most
 * chunk bytes (so a test or fuzzer splits lines at every boundary), 0 at
 * the end.  The timeout is ignored: memory never waits. */
typedef struct pd_mem {
    const char *data;
    size_t len, off, chunk;
} pd_mem;
ssize_t pd_fill_mem(void *ctx, char *buf, size_t len, int timeout_ms);

/* Write "action=ACTION\n\n" to fd, whole; 0 or -1. */
int pd_write_action(int fd, const char *action);

/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points
 * past U+10FFFF), else 0; *bad gets the offset of the first bad byte. */
int pd_utf8_valid(const char *s, size_t n, size_t *bad);

#endif
