/*
 * conf.c - srl-policyd's configuration file, parsed by a table.
 *
 * The file is lines of "DIRECTIVE VALUE"; '#' starts a comment at a line's
 * start or after a blank; blank lines are skipped.  Each directive is a row
 * of `directives` below: its name, whether it belongs to the whole server or
 * to the quota opened last ("quota NAME SPEC"), the function that checks and
 * stores its value, and that function's argument (a field's offset, bounds).
 * A quota's SPEC is srl_config_parse's text and its srl options
 * (capacity, on_full, ...) go through srl_config_set, so srl-policyd never
 * parses a limit itself.  The first fault stops the parse with
 * "FILE:LINE: ..." and frees what was built; nothing is half-applied.
 * No locks: a config is parsed before the server serves.
 */
#include "conf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

enum scope { GLOBAL, QUOTA };

struct parse {
    pd_conf *c;
    const char *file;
    unsigned line;
    char *err;
    size_t errlen;
};

struct directive;
typedef int (*set_fn)(struct parse *p, const struct directive *d, char *value);

struct directive {
    const char *name;
    enum scope scope;
    set_fn set;
    size_t off;           /* offsetof the field in pd_conf or pd_quota */
    uint32_t min, max;    /* bounds of a number */
    const char *what;     /* a number's unit, in messages */
};

static int fault(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fault(struct parse *p, const char *fmt, ...)
{
    int n = snprintf(p->err, p->errlen, "%s:%u: ", p->file, p->line);
    if (n < 0 || (size_t)n >= p->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static pd_quota *cur(struct parse *p) { return &p->c->quota[p->c->quota_count - 1]; }

static void *field(struct parse *p, const struct directive *d)
{
    return d->scope == GLOBAL ? (char *)p->c + d->off : (char *)cur(p) + d->off;
}

static int set_string(struct parse *p, const struct directive *d, char *value)
{
    char **f = field(p, d);
    char *s = strdup(value);
    if (s == NULL) return fault(p, "out of memory");
    free(*f);
    *f = s;
    return 0;
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out, int base)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0' || v < min || v > max) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int set_uint(struct parse *p, const struct directive *d, char *value)
{
    if (parse_u32(value, d->min, d->max, field(p, d), 10) != 0)
        return fault(p, "%s must be %s, %u..%u, not '%s'", d->name, d->what, d->min, d->max,
                     value);
    return 0;
}

static int set_mode(struct parse *p, const struct directive *d, char *value)
{
    if (value[0] != '0' || parse_u32(value, 0, 0777, field(p, d), 8) != 0)
        return fault(p, "%s must be octal permission bits 00..0777 (e.g. 0660), not '%s'",
                     d->name, value);
    return 0;
}

/* An action goes to Postfix verbatim after "action=": printable ASCII only,
 * so no config can make the server send a line break or a control byte. */
static int set_action(struct parse *p, const struct directive *d, char *value)
{
    size_t n = strlen(value);
    if (n > PD_ACTION_MAX)
        return fault(p, "%s is longer than %u bytes", d->name, PD_ACTION_MAX);
    for (size_t i = 0; i < n; i++)
        if (value[i] < 0x20 || value[i] > 0x7e)
            return fault(p, "%s may hold printable ASCII only (byte %zu is 0x%02x)", d->name,
                         i + 1, (unsigned char)value[i]);
    return set_string(p, d, value);
}

static int set_log(struct parse *p, const struct directive *d, char *value)
{
    (void)d;
    if (strcmp(value, "syslog") == 0) {
        p->c->log_to = PD_LOG_SYSLOG;
    } else if (strcmp(value, "stderr") == 0) {
        p->c->log_to = PD_LOG_STDERR;
    } else if (value[0] == '/') {
        p->c->log_to = PD_LOG_FILE;
        char *s = strdup(value);
        if (s == NULL) return fault(p, "out of memory");
        free(p->c->log_file);
        p->c->log_file = s;
    } else {
        return fault(p, "log must be syslog, stderr or an absolute file path, not '%s'", value);
    }
    return 0;
}

static int set_listen(struct parse *p, const struct directive *d, char *value)
{
    if (strcmp(value, "stdin") == 0) {
        free(p->c->listen);
        p->c->listen = NULL;
        return 0;
    }
    if (strncmp(value, "unix:/", 6) != 0 && strncmp(value, "inet:127.", 9) != 0 &&
        strncmp(value, "inet:[::1]:", 11) != 0 && strncmp(value, "inet:localhost:", 15) != 0)
        return fault(p, "listen must be stdin, unix:/ABSOLUTE/PATH or inet:127.0.0.1:PORT "
                     "(a loopback address), not '%s'", value);
    return set_string(p, d, value);
}

static int quota_start(struct parse *p, const struct directive *d, char *value)
{
    (void)d;
    pd_conf *c = p->c;
    size_t n = strcspn(value, " \t");
    if (n == 0 || n > PD_NAME_MAX)
        return fault(p, "quota needs a name of 1..%u bytes, then its limit", PD_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)value[i]) && value[i] != '_' && value[i] != '-')
            return fault(p, "quota name '%.*s': letters, digits, '_' and '-' only", (int)n, value);
    for (uint32_t i = 0; i < c->quota_count; i++)
        if (strlen(c->quota[i].name) == n && memcmp(c->quota[i].name, value, n) == 0)
            return fault(p, "quota '%.*s' is defined twice", (int)n, value);
    if (c->quota_count == PD_QUOTAS_MAX)
        return fault(p, "more than %u quotas", PD_QUOTAS_MAX);
    char *spec = value + n;
    while (*spec == ' ' || *spec == '\t') spec++;
    if (*spec == '\0')
        return fault(p, "quota %.*s needs a limit, e.g. 'quota %.*s sliding_counter:100/1h + "
                     "sliding_counter:500/1d'", (int)n, value, (int)n, value);
    pd_quota *q = &c->quota[c->quota_count];
    memset(q, 0, sizeof *q);
    memcpy(q->name, value, n);
    q->name[n] = '\0';
    q->cost_fixed = 1;
    srl_policy_error e;
    if (srl_config_parse(&q->cfg, spec, &e) != 0)
        return fault(p, "quota %s: %s (at '%.*s')", q->name, e.message,
                     (int)(e.length ? e.length : 1), spec + e.offset);
    c->quota_count++;
    if (srl_config_redis(&q->cfg) != NULL)
        return fault(p, "quota %s: redis= is not for srl-policyd (its state is in a shared "
                     "segment on this host)", q->name);
    return 0;
}

/* srl's own option d->name, through srl_config_set. */
static int set_srl(struct parse *p, const struct directive *d, char *value)
{
    srl_policy_error e;
    if (srl_config_set(&cur(p)->cfg, d->name, value, &e) != 0)
        return fault(p, "%s: %s", d->name, e.message);
    return 0;
}

static int attr_name_ok(const char *s)
{
    if (*s == '\0' || strlen(s) > 64) return 0;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_') return 0;
    return 1;
}

static int set_key(struct parse *p, const struct directive *d, char *value)
{
    (void)d;
    pd_quota *q = cur(p);
    if (q->key_count != 0) return fault(p, "quota %s has a key already", q->name);
    for (char *save = NULL, *w = strtok_r(value, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (!attr_name_ok(w))
            return fault(p, "key: '%s' is not an attribute name (e.g. sasl_username, sender, "
                         "client_address)", w);
        if (q->key_count == PD_KEY_ATTRS_MAX)
            return fault(p, "key: at most %u attributes", PD_KEY_ATTRS_MAX);
        if ((q->key_attrs[q->key_count] = strdup(w)) == NULL) return fault(p, "out of memory");
        q->key_count++;
    }
    return 0;
}

static int set_cost(struct parse *p, const struct directive *d, char *value)
{
    (void)d;
    pd_quota *q = cur(p);
    if (isdigit((unsigned char)value[0])) {
        if (parse_u32(value, 1, UINT32_MAX, &q->cost_fixed, 10) != 0)
            return fault(p, "cost must be a number 1..%u or an attribute name "
                         "(recipient_count), not '%s'", UINT32_MAX, value);
        free(q->cost_attr);
        q->cost_attr = NULL;
        return 0;
    }
    if (!attr_name_ok(value))
        return fault(p, "cost must be a number 1..%u or an attribute name (recipient_count), "
                     "not '%s'", UINT32_MAX, value);
    free(q->cost_attr);
    if ((q->cost_attr = strdup(value)) == NULL) return fault(p, "out of memory");
    return 0;
}

static int set_exempt(struct parse *p, const struct directive *d, char *value)
{
    (void)d;
    pd_quota *q = cur(p);
    size_t n = strcspn(value, " \t");
    char *v = value + n;
    while (*v == ' ' || *v == '\t') v++;
    if (value[n] != '\0') value[n] = '\0';
    if (!attr_name_ok(value) || *v == '\0')
        return fault(p, "exempt needs an attribute name and a value, e.g. 'exempt "
                     "sasl_username postmaster'");
    if (q->exempt_count == PD_EXEMPT_MAX) return fault(p, "more than %u exemptions", PD_EXEMPT_MAX);
    pd_exempt *x = &q->exempt[q->exempt_count];
    x->attr = strdup(value);
    x->value = strdup(v);
    q->exempt_count++;
    if (x->attr == NULL || x->value == NULL) return fault(p, "out of memory");
    return 0;
}

static int set_segment(struct parse *p, const struct directive *d, char *value)
{
    if (srl_name_check(value) != 0)
        return fault(p, "segment '%s' is not an srl segment name", value);
    return set_string(p, d, value);
}

#define G(f) offsetof(pd_conf, f)
#define Q(f) offsetof(pd_quota, f)
static const struct directive directives[] = {
    {"listen", GLOBAL, set_listen, G(listen), 0, 0, NULL},
    {"socket_mode", GLOBAL, set_mode, G(socket_mode), 0, 0, NULL},
    {"log", GLOBAL, set_log, 0, 0, 0, NULL},
    {"max_line", GLOBAL, set_uint, G(max_line), 64, PD_LINE_MAX_LIMIT, "bytes"},
    {"max_attributes", GLOBAL, set_uint, G(max_attributes), 1, PD_ATTRS_MAX_LIMIT, "a count"},
    {"max_clients", GLOBAL, set_uint, G(max_clients), 1, 10000, "a count"},
    {"idle_timeout", GLOBAL, set_uint, G(idle_timeout_s), 1, 86400, "seconds"},
    {"request_timeout", GLOBAL, set_uint, G(request_timeout_s), 1, 3600, "seconds"},
    {"default_action", GLOBAL, set_action, G(default_action), 0, 0, NULL},
    {"missing_action", GLOBAL, set_action, G(missing_action), 0, 0, NULL},
    {"error_action", GLOBAL, set_action, G(error_action), 0, 0, NULL},
    {"defer_action", GLOBAL, set_action, G(defer_action), 0, 0, NULL},
    {"quota", GLOBAL, quota_start, 0, 0, 0, NULL},
    {"key", QUOTA, set_key, 0, 0, 0, NULL},
    {"cost", QUOTA, set_cost, 0, 0, 0, NULL},
    {"exempt", QUOTA, set_exempt, 0, 0, 0, NULL},
    {"segment", QUOTA, set_segment, Q(segment), 0, 0, NULL},
    {"capacity", QUOTA, set_srl, 0, 0, 0, NULL},
    {"on_full", QUOTA, set_srl, 0, 0, 0, NULL},
    {"mode", QUOTA, set_srl, 0, 0, 0, NULL},
    {"owner", QUOTA, set_srl, 0, 0, 0, NULL},
    {"key_display", QUOTA, set_srl, 0, 0, 0, NULL},
    {"lock_timeout_ms", QUOTA, set_srl, 0, 0, 0, NULL},
    {"dry_run", QUOTA, set_srl, 0, 0, 0, NULL},
};
#define NDIRECTIVES (sizeof directives / sizeof directives[0])

/* Edit distance, for "did you mean"; names are short. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[40];
    if (la >= 40 || lb >= 40) return 99;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static int directive(struct parse *p, char *name, char *value)
{
    for (size_t i = 0; i < NDIRECTIVES; i++) {
        const struct directive *d = &directives[i];
        if (strcmp(d->name, name) != 0) continue;
        if (*value == '\0') return fault(p, "%s needs a value", name);
        if (d->scope == QUOTA && p->c->quota_count == 0)
            return fault(p, "%s belongs to a quota: put it after a 'quota NAME LIMIT' line", name);
        return d->set(p, d, value);
    }
    const char *best = NULL;
    size_t bd = 3;
    for (size_t i = 0; i < NDIRECTIVES; i++) {
        size_t dd = distance(name, directives[i].name);
        if (dd < bd) bd = dd, best = directives[i].name;
    }
    if (best != NULL) return fault(p, "unknown directive '%s' (did you mean %s?)", name, best);
    return fault(p, "unknown directive '%s'", name);
}

static int finish(struct parse *p)
{
    pd_conf *c = p->c;
    if (c->quota_count == 0) return fault(p, "no quota: add e.g. 'quota sasl "
                                          "sliding_counter:100/1h' and 'key sasl_username'");
    for (uint32_t i = 0; i < c->quota_count; i++) {
        pd_quota *q = &c->quota[i];
        if (q->key_count == 0)
            return fault(p, "quota %s has no key (e.g. 'key sasl_username')", q->name);
        if (q->segment == NULL) {
            char name[64];
            snprintf(name, sizeof name, "srl-policyd-%s", q->name);
            if ((q->segment = strdup(name)) == NULL) return fault(p, "out of memory");
        }
    }
    static const struct { size_t off; const char *def; } actions[] = {
        {G(default_action), "DUNNO"}, {G(missing_action), "DUNNO"},
        {G(error_action), "DUNNO"}, {G(defer_action), "DEFER_IF_PERMIT"},
    };
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        char **f = (char **)((char *)c + actions[i].off);
        if (*f == NULL && (*f = strdup(actions[i].def)) == NULL) return fault(p, "out of memory");
    }
    return 0;
}

static void defaults(pd_conf *c)
{
    memset(c, 0, sizeof *c);
    c->socket_mode = 0660;
    c->log_to = PD_LOG_SYSLOG;
    c->max_line = 2048;
    c->max_attributes = 100;
    c->max_clients = 100;
    c->idle_timeout_s = 600;
    c->request_timeout_s = 10;
}

int pd_conf_parse(pd_conf *c, const char *file, const char *text, size_t len, char *err,
                  size_t errlen)
{
    struct parse p = {c, file, 0, err, errlen};
    defaults(c);
    err[0] = '\0';
    const char *nul = memchr(text, '\0', len);
    if (nul != NULL) {
        p.line = 1;
        for (const char *s = text; s < nul; s++) p.line += *s == '\n';
        fault(&p, "a NUL byte (is this a text file?)");
        goto fail;
    }
    const char *s = text, *end = text + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        p.line++;
        char line[4096];
        if (n >= sizeof line) {
            fault(&p, "a line longer than %zu bytes", sizeof line - 1);
            goto fail;
        }
        memcpy(line, s, n);
        line[n] = '\0';
        s += n + (nl != NULL);
        for (char *h = line; (h = strchr(h, '#')) != NULL; h++)
            if (h == line || h[-1] == ' ' || h[-1] == '\t') { *h = '\0'; break; }
        for (size_t i = 0; line[i]; i++)
            if ((unsigned char)line[i] < 0x20 && line[i] != '\t') {
                fault(&p, "a control byte 0x%02x at column %zu", (unsigned char)line[i], i + 1);
                goto fail;
            }
        char *name = line;
        while (*name == ' ' || *name == '\t') name++;
        if (*name == '\0') continue;
        char *value = name + strcspn(name, " \t");
        if (*value != '\0') *value++ = '\0';
        while (*value == ' ' || *value == '\t') value++;
        size_t vl = strlen(value);
        while (vl > 0 && (value[vl - 1] == ' ' || value[vl - 1] == '\t')) value[--vl] = '\0';
        if (directive(&p, name, value) != 0) goto fail;
    }
    if (finish(&p) != 0) goto fail;
    return 0;
fail:
    pd_conf_free(c);
    return -1;
}

int pd_conf_load(pd_conf *c, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(PD_CONF_FILE_MAX + 1);
    size_t len = 0;
    ssize_t n = 0;
    while (buf != NULL && len <= PD_CONF_FILE_MAX &&
           (n = read(fd, buf + len, PD_CONF_FILE_MAX + 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    if (buf == NULL || n < 0) {
        snprintf(err, errlen, "%s: %s", path, buf == NULL ? "out of memory" : strerror(errno));
        free(buf);
        return -1;
    }
    if (len > PD_CONF_FILE_MAX) {
        snprintf(err, errlen, "%s: larger than %u bytes", path, PD_CONF_FILE_MAX);
        free(buf);
        return -1;
    }
    int rc = pd_conf_parse(c, path, buf, len, err, errlen);
    free(buf);
    return rc;
}

int pd_conf_open(pd_conf *c, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < c->quota_count; i++) {
        pd_quota *q = &c->quota[i];
        if (q->lim != NULL) continue;
        int rc = srl_open_shared(q->segment, &q->cfg, SRL_CREATE | SRL_CHANGE, &q->lim);
        if (rc != 0) {
            snprintf(err, errlen, "quota %s: segment %s: %s", q->name, q->segment,
                     srl_strerror(rc));
            return -1;
        }
    }
    return 0;
}

void pd_conf_free(pd_conf *c)
{
    for (uint32_t i = 0; i < c->quota_count; i++) {
        pd_quota *q = &c->quota[i];
        if (q->lim != NULL) srl_close(q->lim);
        srl_config_free(&q->cfg);
        free(q->segment);
        free(q->cost_attr);
        for (uint32_t k = 0; k < q->key_count; k++) free(q->key_attrs[k]);
        for (uint32_t k = 0; k < q->exempt_count; k++) {
            free(q->exempt[k].attr);
            free(q->exempt[k].value);
        }
    }
    free(c->listen);
    free(c->log_file);
    free(c->default_action);
    free(c->missing_action);
    free(c->error_action);
    free(c->defer_action);
    memset(c, 0, sizeof *c);
}
