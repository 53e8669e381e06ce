/*
 * rlctl_json.c - a small streaming JSON writer for --json output.
 *
 * Output is compact, one top-level value per line (so `watch --json` is
 * JSON Lines).  The writer tracks nesting and commas; a value written with
 * a key must be inside an object, one written with key NULL inside an array
 * or at the top.  Strings are escaped per RFC 8259: '"', '\' and controls;
 * bytes >= 0x7f are written as \u00NN too, so the output is plain ASCII and
 * valid UTF-8 whatever it is given (rlctl passes keys already escaped by
 * rlctl_escape, which are ASCII).  Numbers are integers, except ratios,
 * written with six decimals from integer arithmetic.  Each top-level object
 * starts with "schema_version" (RLCTL_JSON_SCHEMA).
 *
 * The writer lives on the caller's stack; nothing is shared.
 */
#include "rlctl.h"

#include <assert.h>
#include <inttypes.h>

void rlctl_json_init(rlctl_json *j, FILE *f)
{
    *j = (rlctl_json){.f = f};
}

static void write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc((int)c, f);
    }
    fputc('"', f);
}

/* Comma and key before any value. */
static void value_head(rlctl_json *j, const char *key)
{
    if (j->need_comma[j->depth])
        fputc(',', j->f);
    j->need_comma[j->depth] = 1;
    if (key != NULL) {
        write_string(j->f, key);
        fputc(':', j->f);
    }
}

static void open_(rlctl_json *j, const char *key, char c)
{
    value_head(j, key);
    fputc(c, j->f);
    assert(j->depth + 1 < (int)sizeof j->need_comma);
    j->depth++;
    j->need_comma[j->depth] = 0;
}

static void close_(rlctl_json *j, char c)
{
    assert(j->depth > 0);
    j->depth--;
    fputc(c, j->f);
}

void rlctl_json_begin_obj(rlctl_json *j, const char *key)
{
    int top = j->depth == 0;
    open_(j, key, '{');
    /* Every top-level object says which shape of rlctl's JSON it is
     * (rlctl(1), JSON OUTPUT): scripts can refuse a shape they do not know. */
    if (top)
        rlctl_json_u64(j, "schema_version", RLCTL_JSON_SCHEMA);
}
void rlctl_json_end_obj(rlctl_json *j) { close_(j, '}'); }
void rlctl_json_begin_arr(rlctl_json *j, const char *key) { open_(j, key, '['); }
void rlctl_json_end_arr(rlctl_json *j) { close_(j, ']'); }

void rlctl_json_str(rlctl_json *j, const char *key, const char *v)
{
    value_head(j, key);
    if (v == NULL)
        fputs("null", j->f);
    else
        write_string(j->f, v);
}

void rlctl_json_u64(rlctl_json *j, const char *key, uint64_t v)
{
    value_head(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void rlctl_json_i64(rlctl_json *j, const char *key, int64_t v)
{
    value_head(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void rlctl_json_bool(rlctl_json *j, const char *key, int v)
{
    value_head(j, key);
    fputs(v ? "true" : "false", j->f);
}

void rlctl_json_null(rlctl_json *j, const char *key)
{
    value_head(j, key);
    fputs("null", j->f);
}

void rlctl_json_ratio(rlctl_json *j, const char *key, uint64_t num, uint64_t den)
{
    if (den == 0) {
        rlctl_json_null(j, key);
        return;
    }
    value_head(j, key);
    unsigned __int128 v = (unsigned __int128)num * 1000000u / den;
    fprintf(j->f, "%" PRIu64 ".%06" PRIu64, (uint64_t)(v / 1000000u), (uint64_t)(v % 1000000u));
}

void rlctl_json_milli(rlctl_json *j, const char *key, uint64_t milli)
{
    value_head(j, key);
    fprintf(j->f, "%" PRIu64 ".%03" PRIu64, milli / 1000, milli % 1000);
}

void rlctl_json_end(rlctl_json *j)
{
    assert(j->depth == 0);
    fputc('\n', j->f);
}
