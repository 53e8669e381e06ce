/* json_mini.c - see json_mini.h.  Recursive descent over a bounded input. */
#include "json_mini.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const char *start, *p, *end;
    char *err;
    size_t errlen;
    int depth;
};

static json_value *fail(struct parser *ps, const char *what)
{
    if (ps->err != NULL && ps->err[0] == '\0')
        snprintf(ps->err, ps->errlen, "%s at offset %td", what, ps->p - ps->start);
    return NULL;
}

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static json_value *new_value(json_type t)
{
    json_value *v = calloc(1, sizeof *v);
    if (v != NULL)
        v->type = t;
    return v;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* A string at ps->p (the opening quote); decoded into *out. */
static int parse_string(struct parser *ps, char **out, size_t *out_len)
{
    ps->p++; /* '"' */
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    if (s == NULL)
        return -1;
    for (;;) {
        if (ps->p >= ps->end) {
            free(s);
            fail(ps, "unterminated string");
            return -1;
        }
        unsigned char c = (unsigned char)*ps->p++;
        if (c == '"')
            break;
        if (c < 0x20 || c >= 0x80) {
            free(s);
            fail(ps, c < 0x20 ? "raw control byte in string" : "raw non-ASCII byte in string");
            return -1;
        }
        if (c == '\\') {
            if (ps->p >= ps->end) {
                free(s);
                fail(ps, "truncated escape");
                return -1;
            }
            char e = *ps->p++;
            unsigned u;
            switch (e) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u':
                if (ps->end - ps->p < 4 || hex4(ps->p, &u) != 0 || u >= 0x80) {
                    free(s);
                    fail(ps, "bad or non-ASCII \\u escape");
                    return -1;
                }
                ps->p += 4;
                c = (unsigned char)u;
                break;
            default:
                free(s);
                fail(ps, "bad escape");
                return -1;
            }
        }
        if (n + 2 > cap) {
            cap *= 2;
            char *t = realloc(s, cap);
            if (t == NULL) {
                free(s);
                return -1;
            }
            s = t;
        }
        s[n++] = (char)c;
    }
    s[n] = '\0';
    *out = s;
    *out_len = n;
    return 0;
}

static json_value *parse_value(struct parser *ps);

static int push(json_value *v, json_value *item, char *key)
{
    json_value **items = realloc(v->items, (v->n + 1) * sizeof *items);
    if (items == NULL)
        return -1;
    v->items = items;
    if (v->type == JSON_OBJECT) {
        char **keys = realloc(v->keys, (v->n + 1) * sizeof *keys);
        if (keys == NULL)
            return -1;
        v->keys = keys;
        v->keys[v->n] = key;
    }
    v->items[v->n++] = item;
    return 0;
}

static json_value *parse_container(struct parser *ps, int object)
{
    char close = object ? '}' : ']';
    json_value *v = new_value(object ? JSON_OBJECT : JSON_ARRAY);
    if (v == NULL)
        return NULL;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(ps);
        if (object) {
            size_t kl;
            if (ps->p >= ps->end || *ps->p != '"' || parse_string(ps, &key, &kl) != 0)
                goto bad;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                goto bad;
            }
            ps->p++;
        }
        json_value *item = parse_value(ps);
        if (item == NULL || push(v, item, key) != 0) {
            json_free(item);
            free(key);
            goto bad;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return v;
        }
        goto bad;
    }
bad:
    fail(ps, object ? "bad object" : "bad array");
    json_free(v);
    return NULL;
}

static json_value *parse_number(struct parser *ps)
{
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return fail(ps, "bad number");
    if (*ps->p == '0')
        ps->p++;
    else
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
            return fail(ps, "bad fraction");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
            return fail(ps, "bad exponent");
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    json_value *v = new_value(JSON_NUMBER);
    if (v == NULL)
        return NULL;
    v->text_len = (size_t)(ps->p - s);
    v->text = strndup(s, v->text_len);
    if (v->text == NULL) {
        free(v);
        return NULL;
    }
    return v;
}

static json_value *literal(struct parser *ps, const char *word, json_type t, int b)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "bad literal");
    ps->p += n;
    json_value *v = new_value(t);
    if (v != NULL)
        v->boolean = b;
    return v;
}

static json_value *parse_value(struct parser *ps)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "unexpected end");
    if (++ps->depth > 64)
        return fail(ps, "too deep");
    json_value *v;
    switch (*ps->p) {
    case '{': v = parse_container(ps, 1); break;
    case '[': v = parse_container(ps, 0); break;
    case '"':
        v = new_value(JSON_STRING);
        if (v != NULL && parse_string(ps, &v->text, &v->text_len) != 0) {
            free(v);
            v = NULL;
        }
        break;
    case 't': v = literal(ps, "true", JSON_BOOL, 1); break;
    case 'f': v = literal(ps, "false", JSON_BOOL, 0); break;
    case 'n': v = literal(ps, "null", JSON_NULL, 0); break;
    default: v = parse_number(ps); break;
    }
    ps->depth--;
    return v;
}

json_value *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct parser ps = {text, text, text + len, err, errlen, 0};
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    json_value *v = parse_value(&ps);
    if (v == NULL)
        return fail(&ps, "syntax error");
    skip_ws(&ps);
    if (ps.p != ps.end) {
        json_free(v);
        return fail(&ps, "trailing text");
    }
    return v;
}

void json_free(json_value *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < v->n; i++) {
        json_free(v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->text);
    free(v);
}

const json_value *json_get(const json_value *obj, const char *key)
{
    if (obj == NULL || obj->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

int json_u64(const json_value *v, uint64_t *out)
{
    if (v == NULL || v->type != JSON_NUMBER || v->text[0] == '-' ||
        strspn(v->text, "0123456789") != v->text_len)
        return -1;
    errno = 0;
    unsigned long long x = strtoull(v->text, NULL, 10);
    if (errno != 0)
        return -1;
    *out = x;
    return 0;
}

uint64_t json_get_u64(const json_value *obj, const char *key)
{
    uint64_t v;
    return json_u64(json_get(obj, key), &v) == 0 ? v : UINT64_MAX;
}

const char *json_get_str(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v != NULL && v->type == JSON_STRING ? v->text : NULL;
}

int json_get_bool(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v != NULL && v->type == JSON_BOOL ? v->boolean : -1;
}
