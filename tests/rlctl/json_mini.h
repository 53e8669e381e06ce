/*
 * json_mini.h - a strict JSON parser for checking rlctl's --json output.
 *
 * Parses one complete RFC 8259 value (surrounding whitespace allowed,
 * nothing else) into a tree.  Stricter than the RFC in one way, on
 * purpose: raw bytes >= 0x80 are refused, because rlctl promises
 * ASCII-only output (keys escaped).  Strings are decoded (\uXXXX below 0x80
 * to one byte; higher code points are refused, rlctl never writes them).
 * Numbers keep their text; json_u64 reads a non-negative integer exactly.
 * Test code only: no limits beyond memory, recursion bounded at 64 levels.
 */
#ifndef JSON_MINI_H
#define JSON_MINI_H

#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value {
    json_type type;
    int boolean;
    char *text;                 /* number text, or decoded string (NUL-terminated) */
    size_t text_len;            /* decoded string length */
    size_t n;                   /* array items / object members */
    struct json_value **items;
    char **keys;                /* object member names (decoded) */
} json_value;

/* NULL on a syntax error, with a message in err. */
json_value *json_parse(const char *text, size_t len, char *err, size_t errlen);
void json_free(json_value *v);

/* Object member by name (the first), or NULL. */
const json_value *json_get(const json_value *obj, const char *key);
/* 0 and *out if v is a non-negative integer that fits, else -1. */
int json_u64(const json_value *v, uint64_t *out);
/* The member's integer value, or UINT64_MAX if absent or not an integer. */
uint64_t json_get_u64(const json_value *obj, const char *key);
/* The member's string, or NULL. */
const char *json_get_str(const json_value *obj, const char *key);
/* 1/0 for a boolean member, -1 otherwise. */
int json_get_bool(const json_value *obj, const char *key);

#endif
