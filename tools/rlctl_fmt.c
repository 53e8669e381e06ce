/*
 * rlctl_fmt.c - human output: durations, byte sizes, percentages and
 * aligned tables.
 *
 * These shape what an operator reads; anything a script needs exactly is
 * also in --json, in integer nanoseconds and bytes.  Durations keep
 * milliseconds below a minute and whole seconds above, rounded up (a
 * wait shown never undercuts the Retry-After beside it); zero is "0s" (a
 * duration column always shows a unit, "0" there read as a count).  Tables
 * copy their cells, so callers may format into scratch buffers; columns are
 * separated by two spaces, numbers right-aligned, the last column unpadded.
 * Cells must already be escaped (rlctl_escape): a table prints what it is
 * given.
 */
#include "rlctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *rlctl_fmt_duration(uint64_t ns, char *buf, size_t len)
{
    const uint64_t S = 1000000000ull;
    /* Rounded UP to the last digit shown, like Retry-After: a wait is
     * never shown shorter than it is ("15m" beside Retry-After: 900). */
    if (ns == 0) {
        snprintf(buf, len, "0s");
    } else if (ns < 1000) {
        snprintf(buf, len, "%" PRIu64 "ns", ns);
    } else if (ns < 1000000ull) {
        snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "us", ns / 1000, ns % 1000);
    } else if (ns < S) {
        uint64_t us = ns / 1000 + (ns % 1000 != 0);
        snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "ms", us / 1000, us % 1000);
    } else if (ns < 60 * S) {
        uint64_t ms = ns / 1000000 + (ns % 1000000 != 0);
        snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "s", ms / 1000, ms % 1000);
    } else {
        uint64_t s = ns / S + (ns % S != 0);
        uint64_t part[4] = {s / 86400, s / 3600 % 24, s / 60 % 60, s % 60};
        const char unit[4] = {'d', 'h', 'm', 's'};
        size_t off = 0;
        buf[0] = '\0';
        for (int i = 0; i < 4 && off < len; i++) {
            if (part[i] == 0)
                continue;
            int w = snprintf(buf + off, len - off, "%s%" PRIu64 "%c", off ? " " : "", part[i],
                             unit[i]);
            if (w < 0)
                break;
            off += (size_t)w;
        }
    }
    return buf;
}

const char *rlctl_plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

const char *rlctl_fmt_slot_bytes(const srl_info *in, char *buf, size_t len)
{
    snprintf(buf, len, "%" PRIu64 " (slot %u + its share of the header and bucket locks)",
             in->capacity ? in->segment_bytes / in->capacity : 0, in->slot_bytes);
    return buf;
}

const char *rlctl_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", bytes);
        return buf;
    }
    int u = 0;
    uint64_t whole = bytes;
    unsigned __int128 scaled = (unsigned __int128)bytes * 10; /* tenths */
    while (whole >= 1024 && u < 6) {
        whole /= 1024;
        scaled /= 1024;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 ".%u %s", (uint64_t)(scaled / 10), (unsigned)(scaled % 10),
             units[u]);
    return buf;
}

const char *rlctl_fmt_percent(uint64_t num, uint64_t den, char *buf, size_t len)
{
    if (den == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    unsigned __int128 v = (unsigned __int128)num * 10000u / den; /* hundredths of % */
    snprintf(buf, len, "%" PRIu64 ".%02u%%", (uint64_t)(v / 100), (unsigned)(v % 100));
    return buf;
}

void rlctl_table_init(rlctl_table *t, size_t ncols, const char *const *headers,
                      const unsigned char *right)
{
    *t = (rlctl_table){.ncols = ncols, .headers = headers, .right = right};
}

void rlctl_table_add(rlctl_table *t, const char *const *row)
{
    if (t->oom)
        return;
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        char **cells = realloc(t->cells, cap * t->ncols * sizeof *cells);
        if (cells == NULL) {
            t->oom = 1;
            return;
        }
        t->cells = cells;
        t->cap = cap;
    }
    char **dst = t->cells + t->nrows * t->ncols;
    for (size_t c = 0; c < t->ncols; c++) {
        dst[c] = strdup(row[c] != NULL ? row[c] : "");
        if (dst[c] == NULL) {
            for (size_t k = 0; k < c; k++)
                free(dst[k]);
            t->oom = 1;
            return;
        }
    }
    t->nrows++;
}

static void print_row(const rlctl_table *t, FILE *f, const char *const *row, const size_t *w)
{
    for (size_t c = 0; c < t->ncols; c++) {
        int last = c + 1 == t->ncols;
        int width = (int)w[c];
        if (t->right[c])
            fprintf(f, "%*s", width, row[c]);
        else if (last)
            fputs(row[c], f);
        else
            fprintf(f, "%-*s", width, row[c]);
        fputs(last ? "\n" : "  ", f);
    }
}

int rlctl_table_print(rlctl_table *t, FILE *f)
{
    if (t->oom) {
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    size_t *w = calloc(t->ncols, sizeof *w);
    if (w == NULL) {
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    for (size_t c = 0; c < t->ncols; c++)
        w[c] = strlen(t->headers[c]);
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t n = strlen(t->cells[r * t->ncols + c]);
            if (n > w[c])
                w[c] = n;
        }
    print_row(t, f, t->headers, w);
    for (size_t r = 0; r < t->nrows; r++)
        print_row(t, f, (const char *const *)t->cells + r * t->ncols, w);
    free(w);
    return 0;
}

void rlctl_table_free(rlctl_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->nrows = t->cap = 0;
}

/* The inverse of a format, here so that rlctl_args.c and rlctl_progress.c
 * (RLCTL_PROGRESS_DELAY) share it without calling each other. */
/* "2", "0.5", "1.25": seconds with up to 9 decimals, 1 ms .. 1 day. */
int rlctl_parse_seconds(const char *s, uint64_t *ns)
{
    uint64_t whole = 0, frac = 0, scale = 1000000000ull;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > 86400)
            return -1;
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (scale == 1)
                return -1; /* finer than a nanosecond */
            scale /= 10;
            frac += (uint64_t)(*p - '0') * scale;
        }
    }
    if (*p != '\0')
        return -1;
    uint64_t v = whole * 1000000000ull + frac;
    if (v < 1000000ull || v > 86400ull * 1000000000ull)
        return -1;
    *ns = v;
    return 0;
}
