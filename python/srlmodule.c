/*
 * srlmodule.c - the CPython extension srl._srl: a thin binding of include/srl.h.
 *
 * What it holds:
 *   - Limiter: one srl_limiter handle (shared, anonymous or local) plus a
 *     copy of its policy (the segment's own when it was adopted), so that a
 *     Decision can produce RateLimit-Policy without asking the limiter again.
 *   - Decision: an immutable copy of one srl_decision and that policy.
 *   - headers(): the RateLimit-Policy / RateLimit / Retry-After values, from
 *     the C helpers (srl_format_*), never recomputed here.
 *   - Errors: every negative SRL_E* code is raised as an instance of the
 *     class srl/__init__.py registered for it (_register_errors), called as
 *     cls(code, name, message); an unregistered code raises the base class.
 *     An error for which srl_acquire still decided by on_full (the decision
 *     flagged FLAG_DEGRADED: SRL_ETIMEDOUT, SRL_ENOTRECOVERABLE, a shared
 *     store's SRL_ECORRUPT, every Redis store error) carries that decision
 *     as exc.decision.
 *
 * Invariants and lock rules:
 *   - Every call into libsrl is made with the GIL held.  srl_acquire takes
 *     well under a microsecond; releasing and retaking the GIL around it was
 *     measured slower with 4 threads (docs/design.md, "Python binding"), and
 *     holding it also makes close() safe: srl_close() must not race with
 *     other calls on the same handle, and with the GIL held none can.
 *     The price: a stuck bucket lock (owner alive but stopped) blocks every
 *     thread of the process for up to lock_timeout_ms, not just the caller.
 *   - A closed Limiter has lim == NULL; every method checks it first.
 *   - Keys: bytes-like objects as their bytes, str as its UTF-8 encoding, so
 *     b"k" and "k" are the same key.  Anything else is a TypeError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <string.h>

#include "srl.h"

/* ------------------------------------------------------------ errors */

#define SRL__PY_DETAIL_MAX 600   /* srl_last_error (< 256), srl_open_explain (512) */

static PyObject *error_classes;  /* dict: int code -> class (from __init__.py) */
static PyObject *error_base;     /* srl.Error */

/* The codes' names, index -code, generated from srl.h's SRL_ERRNO_MAP (the
 * one table: nothing here to keep in step with it). */
#define SRL__PY_CODE_NAME(name, code, msg) [-(code)] = "SRL_" #name,
static const char *const code_names[] = {SRL_ERRNO_MAP(SRL__PY_CODE_NAME)};
#undef SRL__PY_CODE_NAME

static const char *code_name(int code)
{
    if (code <= 0 && -code < (int)(sizeof code_names / sizeof code_names[0]))
        return code_names[-code];
    return "SRL_EUNKNOWN";
}

static PyObject *raise_srl_full(int code, const char *what, const char *detail,
                                PyObject *decision);
static PyObject *raise_msg(int code, const char *msg, PyObject *decision);

/* Raise the class registered for code with "what: strerror(code)". Returns NULL. */
static PyObject *raise_srl(int code, const char *what)
{
    return raise_srl_full(code, what, NULL, NULL);
}

/* The same, with exc.decision set (the degraded answer of SRL_ETIMEDOUT and
 * SRL_ENOTRECOVERABLE, which srl_acquire still fills from on_full). */
static PyObject *raise_srl_with(int code, const char *what, PyObject *decision)
{
    return raise_srl_full(code, what, NULL, decision);
}

/* The same for a call on a Redis or fronted store (open included): the
 * message ends with srl_last_error's sentence, which server and what
 * happened.  Only those calls set and clear it, so only they read it. */
static PyObject *raise_srl_redis(int code, const char *what, PyObject *decision)
{
    char detail[SRL__PY_DETAIL_MAX];
    (void)srl_last_error(detail, sizeof detail);
    return raise_srl_full(code, what, detail, decision);
}

/* detail (may be NULL or ""): the cause the library named, after the
 * code's text; without one, SRL_ESYS names errno's. */
static PyObject *raise_srl_full(int code, const char *what, const char *detail,
                                PyObject *decision)
{
    int saved_errno = errno;
    char msg[2048];

    if (detail != NULL && detail[0] != '\0')
        snprintf(msg, sizeof msg, "%s: %s: %s", what, srl_strerror(code), detail);
    else if (code == SRL_ESYS)
        snprintf(msg, sizeof msg, "%s: %s (%s)", what, srl_strerror(code), strerror(saved_errno));
    else
        snprintf(msg, sizeof msg, "%s: %s", what, srl_strerror(code));
    return raise_msg(code, msg, decision);
}

/* Raise the class registered for code with the whole message msg. */
static PyObject *raise_msg(int code, const char *msg, PyObject *decision)
{
    PyObject *cls = NULL, *key, *exc;
    if (error_classes != NULL) {
        key = PyLong_FromLong(code);
        if (key == NULL)
            return NULL;
        cls = PyDict_GetItemWithError(error_classes, key);
        Py_DECREF(key);
        if (cls == NULL && PyErr_Occurred())
            return NULL;
    }
    if (cls == NULL)
        cls = error_base;
    if (cls == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s [%s]", msg, code_name(code));
        return NULL;
    }
    exc = PyObject_CallFunction(cls, "iss", code, code_name(code), msg);
    if (exc == NULL)
        return NULL;
    if (decision != NULL && PyObject_SetAttrString(exc, "decision", decision) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *register_errors(PyObject *self, PyObject *args)
{
    PyObject *base, *classes;

    (void)self;
    if (!PyArg_ParseTuple(args, "OO!:_register_errors", &base, &PyDict_Type, &classes))
        return NULL;
    if (!PyType_Check(base) || !PyType_IsSubtype((PyTypeObject *)base,
                                                 (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "_register_errors: base must be an Exception class");
        return NULL;
    }
    Py_INCREF(base);
    Py_INCREF(classes);
    Py_XSETREF(error_base, base);
    Py_XSETREF(error_classes, classes);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- keys */

typedef struct key_view {
    Py_buffer buf;
    int has_buf;
    const void *data;
    size_t len;
} key_view;

static int key_get(PyObject *obj, key_view *k)
{
    k->has_buf = 0;
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
        if (s == NULL)
            return -1;
        k->data = s;
        k->len = (size_t)n;
        return 0;
    }
    if (PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &k->buf, PyBUF_SIMPLE) < 0)
            return -1;
        k->has_buf = 1;
        k->data = k->buf.buf;
        k->len = (size_t)k->buf.len;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "key must be str or bytes, not %.100s", Py_TYPE(obj)->tp_name);
    return -1;
}

static void key_release(key_view *k)
{
    if (k->has_buf)
        PyBuffer_Release(&k->buf);
}

/* --------------------------------------------------------- Decision */

typedef struct {
    PyObject_HEAD
    srl_decision d;
    srl_limits limits;   /* the limiter's, for the text and the headers */
} DecisionObject;

static PyTypeObject *Decision_type;

static PyObject *decision_new(const srl_decision *d, const srl_limits *p)
{
    DecisionObject *o = PyObject_New(DecisionObject, Decision_type);
    if (o == NULL)
        return NULL;
    o->d = *d;
    o->limits = *p;
    return (PyObject *)o;
}

static void Decision_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyObject *Decision_get_allowed(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((DecisionObject *)self)->d.allowed);
}

static PyObject *Decision_get_retry_after(PyObject *self, void *c)
{
    char buf[32];
    int n = srl_format_retry_after(&((DecisionObject *)self)->d, buf, sizeof buf);
    (void)c;
    if (n < 0)
        return raise_srl(n, "srl_format_retry_after");
    return PyLong_FromString(buf, NULL, 10);
}

/* The canonical text of p ("token_bucket:100/1m", or limits joined by " + "). */
static PyObject *policy_text(const srl_limits *p)
{
    char buf[SRL_LIMITS_TEXT_MAX];
    int n = srl_limits_format(p, buf, sizeof buf);
    if (n < 0)
        return raise_srl(n, "srl_limits_format");
    return PyUnicode_FromStringAndSize(buf, n);
}

static PyObject *Decision_get_policy(PyObject *self, void *c)
{
    (void)c;
    return policy_text(&((DecisionObject *)self)->limits);
}

static int Decision_bool(PyObject *self)
{
    return ((DecisionObject *)self)->d.allowed != 0;
}

static PyObject *Decision_repr(PyObject *self)
{
    const srl_decision *d = &((DecisionObject *)self)->d;
    return PyUnicode_FromFormat(
        "srl.Decision(allowed=%s, limit=%u, remaining=%u, retry_after_ns=%llu, "
        "reset_after_ns=%llu, flags=%u)",
        d->allowed ? "True" : "False", (unsigned)d->limit, (unsigned)d->remaining,
        (unsigned long long)d->retry_after_ns, (unsigned long long)d->reset_after_ns,
        d->flags);
}

static PyMemberDef Decision_members[] = {
    {.name = "limit", .type = T_UINT, .offset = offsetof(DecisionObject, d.limit),
     .flags = READONLY, .doc = "the policy's permits"},
    {.name = "remaining", .type = T_UINT, .offset = offsetof(DecisionObject, d.remaining),
     .flags = READONLY, .doc = "requests of cost 1 still allowed now"},
    {.name = "retry_after_ns", .type = T_ULONGLONG,
     .offset = offsetof(DecisionObject, d.retry_after_ns), .flags = READONLY,
     .doc = "0 when allowed; else nanoseconds until this cost passes"},
    {.name = "reset_after_ns", .type = T_ULONGLONG,
     .offset = offsetof(DecisionObject, d.reset_after_ns), .flags = READONLY,
     .doc = "nanoseconds until the key is at rest"},
    {.name = "flags", .type = T_UINT, .offset = offsetof(DecisionObject, d.flags),
     .flags = READONLY, .doc = "FLAG_UNTRACKED | FLAG_DEGRADED | FLAG_WOULD_DENY | FLAG_LOCAL | FLAG_BAN_STARTED"},
    {.name = "wait_ns", .type = T_ULONGLONG, .offset = offsetof(DecisionObject, d.wait_ns),
     .flags = READONLY, .doc = "reserve(): nanoseconds to wait before acting (0: now)"},
    {.name = "binding", .type = T_UINT, .offset = offsetof(DecisionObject, d.binding),
     .flags = READONLY,
     .doc = "a compound policy's binding limit (the one that denied, or has least left)"},
    {.name = NULL},
};

static PyObject *Decision_get_would_deny(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong((((DecisionObject *)self)->d.flags & SRL_DECISION_WOULD_DENY) != 0);
}

static PyGetSetDef Decision_getset[] = {
    {.name = "allowed", .get = Decision_get_allowed, .doc = "True if the request was admitted"},
    {.name = "would_deny", .get = Decision_get_would_deny,
     .doc = "dry run: admitted, but an enforcing limiter would have denied (retry_after, "
            "remaining are the denial's)"},
    {.name = "retry_after", .get = Decision_get_retry_after,
     .doc = "whole seconds to wait, rounded up (the Retry-After value); 0 when allowed"},
    {.name = "policy", .get = Decision_get_policy, .doc = "canonical text of the policy"},
    {.name = NULL},
};

static PyType_Slot Decision_slots[] = {
    {Py_tp_dealloc, Decision_dealloc},
    {Py_tp_repr, Decision_repr},
    {Py_nb_bool, Decision_bool},
    {Py_tp_members, Decision_members},
    {Py_tp_getset, Decision_getset},
    {Py_tp_doc, "One rate-limit decision (read-only); true when allowed."},
    {0, NULL},
};

static PyType_Spec Decision_spec = {
    .name = "srl.Decision",
    .basicsize = sizeof(DecisionObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Decision_slots,
};

/* ---------------------------------------------------------- Limiter */

typedef struct {
    PyObject_HEAD
    srl_limiter *lim;
    srl_limits limits;
    srl_store_kind kind;
    PyObject *name;   /* str: the RateLimit-Policy name (limiter_name), or None */
} LimiterObject;

static PyTypeObject *Limiter_type;

/* "O&" converter: a non-negative int that fits 64 bits (PyArg's K and k
 * formats wrap negatives and overflows silently: cost=2**64+1 would be 1). */
static int to_u64(PyObject *obj, void *out)
{
    unsigned long long v;

    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "an int is required, not %.100s", Py_TYPE(obj)->tp_name);
        return 0;
    }
    v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return 0;
    *(unsigned long long *)out = v;
    return 1;
}

/* One option through the library's table (srl_config_set): its refusal is
 * a ValueError "NAME: why", or for a policy text (policy, a tier's) the
 * library's error with the byte it names in that text. */
static int set_option(srl_config *cfg, const char *name, const char *value)
{
    srl_policy_error pe;
    int rc = srl_config_set(cfg, name, value, &pe);
    if (rc == 0)
        return 0;
    size_t at = strlen(name) + 1;   /* pe counts in NAME=VALUE */
    int tier = strncmp(name, "tier.", 5) == 0;
    char what[400];
    if (rc == SRL_EPOLICY && (strcmp(name, "policy") == 0 || (tier && pe.offset >= at))) {
        if (tier)
            snprintf(what, sizeof what, "tier %.40s: policy '%.80s' at byte %u: %s", name + 5,
                     value, (unsigned)(pe.offset - at), pe.message);
        else
            snprintf(what, sizeof what, "policy '%.80s' at byte %u: %s", value,
                     (unsigned)(pe.offset - at), pe.message);
        raise_srl(rc, what);
    } else if (rc == SRL_EPOLICY) {
        PyErr_Format(PyExc_ValueError, "%s: %s", tier ? "tiers" : name, pe.message);
    } else {
        raise_srl(rc, name);
    }
    return -1;
}

/* A non-negative int keyword argument (None or absent: not given) as its
 * text, in base 10 or 8 (mode), for set_option. */
static int set_int(srl_config *cfg, const char *name, PyObject *v, int octal)
{
    unsigned long long x;
    char text[32];

    if (v == NULL || v == Py_None)
        return 0;
    if (PyLong_Check(v) && PyObject_RichCompareBool(v, Py_False, Py_LT) == 1) {
        /* the library says what NAME takes (no OverflowError traceback) */
        return set_option(cfg, name, "-1");
    }
    if (!to_u64(v, &x))
        return -1;
    snprintf(text, sizeof text, octal ? "%llo" : "%llu", x);
    return set_option(cfg, name, text);
}

/* A bool keyword argument (absent: not given) as on/off. */
static int set_bool(srl_config *cfg, const char *name, int v)
{
    return v < 0 ? 0 : set_option(cfg, name, v ? "on" : "off");
}

/* tiers={"paid": "token_bucket:10000/1m", ...} (None or empty: no tiers):
 * each one tier.NAME, the library checks the name and the table. */
static int set_tiers(srl_config *cfg, PyObject *tiers)
{
    PyObject *name, *policy;
    Py_ssize_t pos = 0;

    if (tiers == NULL || tiers == Py_None)
        return 0;
    if (!PyDict_Check(tiers)) {
        PyErr_SetString(PyExc_TypeError, "tiers must be a dict of name -> policy text");
        return -1;
    }
    while (PyDict_Next(tiers, &pos, &name, &policy)) {
        const char *nm = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        const char *text = PyUnicode_Check(policy) ? PyUnicode_AsUTF8(policy) : NULL;
        char opt[SRL_TIER_NAME_MAX + 8];
        if (nm == NULL || text == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "tiers: names and policies must be str");
            return -1;
        }
        /* a longer name is cut one byte past the longest: refused as too long */
        snprintf(opt, sizeof opt, "tier.%.*s", (int)SRL_TIER_NAME_MAX + 1, nm);
        if (set_option(cfg, opt, text) < 0)
            return -1;
    }
    return 0;
}

/* What the library refuses of a whole configuration and not of one option
 * (lockfree=on with no gcra limit, as mod_srl's SrlLimiter line is
 * refused): cfg through its text, srl_config_format then srl_config_parse,
 * so the refusal is the library's own sentence.  A ValueError. */
static int whole_check(const srl_config *cfg)
{
    char text[4096];
    srl_config back;
    srl_policy_error pe;

    if (!(cfg->flags & SRL_CONFIG_LOCKFREE))
        return 0;   /* the one rule across options today */
    int n = srl_config_format(cfg, text, sizeof text);
    if (n < 0 || (size_t)n >= sizeof text)
        return 0;   /* nothing to say it with: the open decides */
    if (srl_config_parse(&back, text, &pe) == 0) {
        srl_config_free(&back);
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "lockfree: %s", pe.message);
    return -1;
}

/* The common keyword arguments of every opener onto cfg; the ones not given
 * (NULL, None, -1) keep the spec's value or the default. */
struct open_args {
    PyObject *policy, *capacity, *key_display, *lock_timeout_ms, *mode, *tiers;
    const char *on_full;
    int dry_run, lockfree, flood_cache;
};

/* cfg from spec (policy: a policy, or a whole spec such as "gcra:10/1s
 * capacity=1000 on_full=deny", srl.h CONFIGURATION TEXT) and the keyword
 * arguments after it.  On error nothing is left to free. */
static int config_from(srl_config *cfg, const struct open_args *a, int redis_ok)
{
    srl_config_init(cfg);
    if (a->policy != NULL && a->policy != Py_None) {
        const char *text;
        if (!PyUnicode_Check(a->policy)) {
            PyErr_SetString(PyExc_TypeError, "policy must be a str such as \"100/1m\"");
            return -1;
        }
        text = PyUnicode_AsUTF8(a->policy);
        if (text == NULL)
            return -1;
        srl_policy_error pe;
        int rc = srl_config_parse(cfg, text, &pe);
        if (rc < 0) {
            char what[320];
            snprintf(what, sizeof what, "policy '%.80s' at byte %u: %s", text,
                     (unsigned)pe.offset, pe.message);
            raise_srl(rc, what);
            return -1;
        }
        if (srl_config_redis(cfg) != NULL && !redis_ok) {
            srl_config_free(cfg);
            PyErr_SetString(PyExc_ValueError, "redis=: give the uri as redis()'s first "
                                              "argument, or use shared()/fronted() for the host "
                                              "segment in front");
            return -1;
        }
    }
    if (set_int(cfg, "capacity", a->capacity, 0) < 0 ||
        set_int(cfg, "key_display", a->key_display, 0) < 0 ||
        set_int(cfg, "lock_timeout_ms", a->lock_timeout_ms, 0) < 0 ||
        set_int(cfg, "mode", a->mode, 1) < 0 ||
        (a->on_full != NULL && set_option(cfg, "on_full", a->on_full) < 0) ||
        set_bool(cfg, "dry_run", a->dry_run) < 0 || set_bool(cfg, "lockfree", a->lockfree) < 0 ||
        set_bool(cfg, "flood_cache", a->flood_cache) < 0 || set_tiers(cfg, a->tiers) < 0 ||
        whole_check(cfg) < 0) {
        srl_config_free(cfg);
        return -1;
    }
    return 0;
}

/* The limiter's name in RateLimit-Policy, as mod_srl and PHP name it: the
 * segment's name without its '/' (a fronted store's host segment, a Redis
 * store's key prefix); None (srl.headers: "default") for an anonymous or
 * local store, or a name that is not a header token. */
static PyObject *limiter_name(const srl_info *in)
{
    const char *n = in->name[0] == '/' ? in->name + 1 : in->name;
    size_t len = strnlen(n, sizeof in->name - 1);
    int ok = len > 0 && in->kind != SRL_STORE_ANONYMOUS && in->kind != SRL_STORE_LOCAL;
    for (size_t i = 0; ok && i < len; i++) {
        unsigned char c = (unsigned char)n[i];
        ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '-';
    }
    if (!ok)
        Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(n, (Py_ssize_t)len);
}

static PyObject *limiter_wrap(PyTypeObject *cls, srl_limiter *lim)
{
    srl_info info;
    LimiterObject *o;
    int rc = srl_info_get(lim, &info);

    if (rc < 0) {
        srl_close(lim);
        return raise_srl(rc, "srl_info_get");
    }
    o = (LimiterObject *)cls->tp_alloc(cls, 0);
    if (o == NULL) {
        srl_close(lim);
        return NULL;
    }
    o->lim = lim;
    o->limits = info.limits;
    o->kind = info.kind;
    o->name = limiter_name(&info);
    if (o->name == NULL) {
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

/* srl_name_check's rule, for a name it refused. */
#define NAME_RULE "a segment name is an optional '/', then 1..200 bytes of [A-Za-z0-9._-] " \
                  "(no other '/'), not all dots"

/* srl_open_explain's sentence for segment name (with or without its '/'):
 * the owner, the mode, this process and the fix. */
static void explain_open(const char *name, const srl_config *cfg, char *why, size_t len)
{
    char slashed[SRL_NAME_MAX + 2];
    snprintf(slashed, sizeof slashed, "%s%s", name[0] == '/' ? "" : "/", name);
    if (srl_open_explain(slashed, cfg, why, len) == SRL_EINVAL)
        why[0] = '\0';
}

/* srl_open_fronted(name, uri, cfg, flags); cfg is freed.  A refusal names its
 * cause: the Redis server and what it did (srl_last_error), or for the host
 * segment its owner, mode and fix (srl_open_explain).  The uri is never
 * quoted: it may hold a password. */
static PyObject *open_fronted(PyTypeObject *cls, const char *name, const char *uri,
                              srl_config *cfg, unsigned flags)
{
    srl_limiter *lim = NULL;
    char what[300], why[SRL__PY_DETAIL_MAX] = "";
    int rc = srl_open_fronted(name, uri, cfg, flags, &lim);

    if (rc < 0) {
        /* "" after SRL_EACCES: the host segment's, srl_open_explain says why */
        if (srl_last_error(why, sizeof why) == 0 && rc == SRL_EACCES)
            explain_open(name, cfg, why, sizeof why);
        if (why[0] == '\0' && rc == SRL_EINVAL && srl_name_check(name) != 0)
            snprintf(why, sizeof why, "%s", NAME_RULE);
    }
    srl_config_free(cfg);
    if (rc < 0) {
        snprintf(what, sizeof what, "srl_open_fronted('%.200s')", name);
        return raise_srl_full(rc, what, why, NULL);
    }
    return limiter_wrap(cls, lim);
}

static PyObject *Limiter_shared(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "policy", "capacity", "key_display", "on_full",
                             "create", "exclusive", "lock_timeout_ms", "mode", "dry_run", "tiers",
                             "change", "lockfree", "flood_cache", NULL};
    const char *name;
    struct open_args a = {.dry_run = -1, .lockfree = -1, .flood_cache = -1};
    int create = 1, exclusive = 0, change = 0, rc;
    srl_config cfg;
    srl_limiter *lim = NULL;
    unsigned flags;
    char what[800];

    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|OOOzpp$OOpOppp:shared", kwlist, &name,
                                     &a.policy, &a.capacity, &a.key_display, &a.on_full,
                                     &create, &exclusive, &a.lock_timeout_ms, &a.mode,
                                     &a.dry_run, &a.tiers, &change, &a.lockfree, &a.flood_cache))
        return NULL;
    int has_policy = a.policy != NULL && a.policy != Py_None;
    if (create && !has_policy) {
        PyErr_SetString(PyExc_TypeError,
                        "shared(): a policy is needed to create a segment (or pass create=False)");
        return NULL;
    }
    if (change && !has_policy) {
        PyErr_SetString(PyExc_TypeError, "shared(): change=True needs the policy to change to");
        return NULL;
    }
    if (config_from(&cfg, &a, 1) < 0)
        return NULL;
    flags = (create ? SRL_CREATE : 0u) | (exclusive ? SRL_EXCL : 0u) | (change ? SRL_CHANGE : 0u);
    if (srl_config_redis(&cfg) != NULL)   /* "... redis=URI": the host segment in front */
        return open_fronted((PyTypeObject *)cls, name, srl_config_redis(&cfg), &cfg, flags);
    /* Without create and without a policy, cfg NULL: the segment's policy,
     * geometry and on_full are adopted (and the default lock timeout used);
     * with a policy, the segment must match it (SRL_EMISMATCH otherwise).
     * A dry run adopts through SRL_ADOPT, so that cfg still carries it. */
    if (!has_policy && !create && (cfg.flags & SRL_CONFIG_DRY_RUN))
        rc = srl_open_shared(name, &cfg, SRL_ADOPT, &lim);
    else
        rc = srl_open_shared(name, (!has_policy && !create) ? NULL : &cfg, flags, &lim);
    if (rc == SRL_EMISMATCH) {
        /* Say what differs: the segment's own config, through an adopting open. */
        char why[1024] = "";
        srl_limiter *seg;
        srl_info info;
        if (srl_open_shared(name, &cfg, SRL_ADOPT, &seg) == 0) {   /* cfg: its trust */
            if (srl_info_get(seg, &info) == 0)
                srl_mismatch_explain_for(&cfg, &info, SRL_BINDING_PYTHON, why, sizeof why);
            srl_close(seg);
        }
        srl_config_free(&cfg);
        char msg[1400];
        snprintf(msg, sizeof msg, "srl_open_shared('%.200s'): %s", name, why);
        return raise_srl(rc, msg);
    }
    if (rc == SRL_EACCES) {   /* the owner, the mode, this process and the fix */
        char why[SRL__PY_DETAIL_MAX] = "";
        explain_open(name, &cfg, why, sizeof why);
        srl_config_free(&cfg);
        snprintf(what, sizeof what, "srl_open_shared('%.200s')", name);
        return raise_srl_full(rc, what, why, NULL);
    }
    srl_config_free(&cfg);
    if (rc < 0) {
        char why[512] = "";   /* a refused size: what it needs, what is free */
        if ((rc == SRL_ENOSPC || rc == SRL_ETOOBIG) && create)
            srl_room_check(&cfg, why, sizeof why);
        snprintf(what, sizeof what, "srl_open_shared('%.200s')%s%s", name, why[0] ? ": " : "", why);
        if (rc == SRL_EINVAL && srl_name_check(name) != 0)
            return raise_srl_full(rc, what, NAME_RULE, NULL);
        return raise_srl(rc, what);
    }
    return limiter_wrap((PyTypeObject *)cls, lim);
}

static PyObject *open_unnamed(PyObject *cls, PyObject *args, PyObject *kw, int local)
{
    static char *kwlist[] = {"policy", "capacity", "key_display", "on_full",
                             "lock_timeout_ms", "dry_run", "tiers", "lockfree", "flood_cache",
                             NULL};
    struct open_args a = {.dry_run = -1, .lockfree = -1, .flood_cache = -1};
    srl_config cfg;
    srl_limiter *lim = NULL;
    int rc;

    if (!PyArg_ParseTupleAndKeywords(args, kw,
                                     local ? "O|OOz$OpOpp:local" : "O|OOz$OpOpp:anonymous",
                                     kwlist, &a.policy, &a.capacity, &a.key_display,
                                     &a.on_full, &a.lock_timeout_ms, &a.dry_run, &a.tiers,
                                     &a.lockfree, &a.flood_cache))
        return NULL;
    if (a.policy == Py_None) {
        PyErr_SetString(PyExc_TypeError, "a policy is needed, e.g. \"100/1m\"");
        return NULL;
    }
    if (config_from(&cfg, &a, 0) < 0)
        return NULL;
    /* the local store refuses tiers: SRL_ENOTSUP */
    rc = local ? srl_open_local(&cfg, &lim) : srl_open_anonymous(&cfg, &lim);
    srl_config_free(&cfg);
    if (rc < 0)
        return raise_srl(rc, local ? "srl_open_local" : "srl_open_anonymous");
    return limiter_wrap((PyTypeObject *)cls, lim);
}

static PyObject *Limiter_anonymous(PyObject *cls, PyObject *args, PyObject *kw)
{
    return open_unnamed(cls, args, kw, 0);
}

static PyObject *Limiter_local(PyObject *cls, PyObject *args, PyObject *kw)
{
    return open_unnamed(cls, args, kw, 1);
}

static int check_open(LimiterObject *self);
static int parse_key_cost(PyObject *args, PyObject *kw, const char *fmt, key_view *k,
                          unsigned long long *cost);

/* redis(uri, policy=None, ...): srl_open_redis.  Without a policy the
 * store's own (P:cfg) is adopted. */
static PyObject *Limiter_redis(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"uri", "policy", "on_full", "lock_timeout_ms", "dry_run", "tiers",
                             NULL};
    const char *uri;
    struct open_args a = {.dry_run = -1, .lockfree = -1, .flood_cache = -1};
    srl_config cfg;
    srl_limiter *lim = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|Oz$OpO:redis", kwlist, &uri, &a.policy,
                                     &a.on_full, &a.lock_timeout_ms, &a.dry_run, &a.tiers))
        return NULL;
    int has_policy = a.policy != NULL && a.policy != Py_None;
    if (config_from(&cfg, &a, 0) < 0)
        return NULL;
    int rc = srl_open_redis(uri, has_policy ? &cfg : NULL, &lim);
    if (rc < 0) {
        char why[SRL__PY_DETAIL_MAX] = "";
        if (srl_last_error(why, sizeof why) == 0 && rc == SRL_EINVAL)
            (void)srl_redis_uri_check(uri, why, sizeof why);   /* names the bad part, no password */
        srl_config_free(&cfg);
        return raise_srl_full(rc, "srl_open_redis", why, NULL);
    }
    srl_config_free(&cfg);
    return limiter_wrap((PyTypeObject *)cls, lim);
}

/* fronted(name, uri, policy, ...): srl_open_fronted, the fleet's limit on
 * Redis with the host segment NAME in front (kind 'fronted'). */
static PyObject *Limiter_fronted(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "uri", "policy", "capacity", "key_display", "on_full",
                             "create", "exclusive", "lock_timeout_ms", "mode", "dry_run",
                             "tiers", NULL};
    const char *name, *uri;
    struct open_args a = {.dry_run = -1, .lockfree = -1, .flood_cache = -1};
    int create = 1, exclusive = 0;
    srl_config cfg;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "ssO|OOzpp$OOpO:fronted", kwlist, &name, &uri,
                                     &a.policy, &a.capacity, &a.key_display, &a.on_full,
                                     &create, &exclusive, &a.lock_timeout_ms, &a.mode,
                                     &a.dry_run, &a.tiers))
        return NULL;
    if (a.policy == Py_None) {
        PyErr_SetString(PyExc_TypeError, "fronted(): a policy is needed, e.g. \"100/1m\"");
        return NULL;
    }
    if (config_from(&cfg, &a, 0) < 0)
        return NULL;
    return open_fronted((PyTypeObject *)cls, name, uri, &cfg,
                        (create ? SRL_CREATE : 0u) | (exclusive ? SRL_EXCL : 0u));
}

/* Raise for rc of a call on self: a Redis or fronted store's names its
 * server and cause. */
static PyObject *raise_on(const LimiterObject *self, int rc, const char *what,
                          PyObject *decision)
{
    if (self->kind == SRL_STORE_REDIS || self->kind == SRL_STORE_FRONTED)
        return raise_srl_redis(rc, what, decision);
    return raise_srl_with(rc, what, decision);
}

/* SRL_ECOST for cost under limits: what the policy allows at most. */
static PyObject *raise_cost(unsigned long long cost, const srl_limits *p, const char *what)
{
    char pol[SRL_LIMITS_TEXT_MAX], msg[SRL_LIMITS_TEXT_MAX + 40], head[80];
    uint32_t most = UINT32_MAX;

    for (uint32_t i = 0; i < p->count && i < SRL_LIMITS_MAX; i++) {
        uint32_t m = p->limit[i].burst > p->limit[i].permits ? p->limit[i].burst
                                                             : p->limit[i].permits;
        most = m < most ? m : most;
    }
    if (srl_limits_format(p, pol, sizeof pol) < 0)
        pol[0] = '\0';
    snprintf(head, sizeof head, "%s: cost %llu", what, cost);
    if (cost == 0)
        snprintf(msg, sizeof msg, "a request costs 1 or more");
    else
        snprintf(msg, sizeof msg, "'%s' allows %u at most", pol, (unsigned)most);
    return raise_srl_full(SRL_ECOST, head, msg, NULL);
}

static PyObject *Limiter_refund(PyObject *op, PyObject *args, PyObject *kw)
{
    LimiterObject *self = (LimiterObject *)op;
    key_view k;
    unsigned long long cost;

    if (check_open(self) < 0 || parse_key_cost(args, kw, "O|O&:refund", &k, &cost) < 0)
        return NULL;
    int rc = srl_refund(self->lim, k.data, k.len, (uint32_t)cost);
    key_release(&k);
    if (rc == SRL_ENOENT)
        Py_RETURN_FALSE;   /* not tracked: nothing to give back */
    if (rc == SRL_ECOST)
        return raise_cost(cost, &self->limits, "srl_refund");
    if (rc < 0)
        return raise_on(self, rc, "srl_refund", NULL);
    Py_RETURN_TRUE;
}

static int check_open(LimiterObject *self)
{
    if (self->lim == NULL) {
        PyErr_SetString(PyExc_ValueError, "operation on a closed srl.Limiter");
        return -1;
    }
    return 0;
}

static int parse_key_cost(PyObject *args, PyObject *kw, const char *fmt, key_view *k,
                          unsigned long long *cost)
{
    static char *kwlist[] = {"key", "cost", NULL};
    PyObject *key;

    *cost = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &key, to_u64, cost))
        return -1;
    if (*cost > UINT32_MAX) {   /* above any policy's permits: what srl says of those */
        raise_srl(SRL_ECOST, "cost above 2**32-1");
        return -1;
    }
    return key_get(key, k);
}

/* Issue 41 item 4: the Python function srl/__init__.py registers
 * (_set_ban_hook), called as hook(limiter, key, policy_text, decision) on
 * a decision that started a ",penalty=" ban (SRL_DECISION_BAN_STARTED);
 * it logs through the logging module.  Its exception is the caller's. */
static PyObject *ban_hook;

static PyObject *set_ban_hook(PyObject *mod, PyObject *fn)
{
    (void)mod;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_set_ban_hook: a callable or None");
        return NULL;
    }
    Py_XSETREF(ban_hook, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* dec (a new Decision, or NULL) after the hook ran for a started ban;
 * NULL (dec released) if the hook raised. */
static PyObject *ban_started(PyObject *lim, PyObject *key, const srl_limits *limits,
                             PyObject *dec)
{
    if (dec == NULL || ban_hook == NULL ||
        !(((DecisionObject *)dec)->d.flags & SRL_DECISION_BAN_STARTED))
        return dec;
    char text[SRL_LIMITS_TEXT_MAX];
    if (srl_limits_format(limits, text, sizeof text) < 0)
        snprintf(text, sizeof text, "?");
    PyObject *r = PyObject_CallFunction(ban_hook, "OOsO", lim, key, text, dec);
    if (r == NULL) {
        Py_DECREF(dec);
        return NULL;
    }
    Py_DECREF(r);
    return dec;
}

/* The Decision of srl_acquire/srl_reserve's rc, or the exception.  An error
 * for which the library still decided by on_full (flags FLAG_DEGRADED: a
 * lock timed out or unusable, a Redis server slow, gone or answering out of
 * range) carries that decision as exc.decision; d was zeroed before the
 * call, so an error that left it untouched carries none. */
static PyObject *decided(const LimiterObject *self, const srl_limits *limits, int rc,
                         const srl_decision *d, const char *what, unsigned long long cost)
{
    if (rc < 0 && (d->flags & SRL_DECISION_DEGRADED)) {
        PyObject *dec = decision_new(d, limits);
        if (dec == NULL)
            return NULL;
        raise_on(self, rc, what, dec);
        Py_DECREF(dec);
        return NULL;
    }
    if (rc == SRL_ECOST)
        return raise_cost(cost, limits, what);
    if (rc < 0)
        return raise_on(self, rc, what, NULL);
    return decision_new(d, limits);
}

static PyObject *Limiter_acquire(PyObject *op, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"key", "cost", "tier", NULL};
    LimiterObject *self = (LimiterObject *)op;
    key_view k;
    unsigned long long cost = 1;
    const char *tier_name = NULL;
    PyObject *key;
    srl_decision d;
    srl_tier tier;
    int rc, t = 0;

    /* tier="paid": decided under that tier (srl.h, TIERS); None: tier 0. */
    if (check_open(self) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O|O&$z:acquire", kwlist, &key, to_u64, &cost,
                                     &tier_name))
        return NULL;
    if (cost > UINT32_MAX)
        return raise_srl(SRL_ECOST, "cost above 2**32-1");
    if (tier_name != NULL && (t = srl_tier_find(self->lim, tier_name)) < 0) {
        char what[120];
        snprintf(what, sizeof what, "no tier '%.40s' in this limiter", tier_name);
        return raise_srl(t, what);
    }
    if (srl_tier_get(self->lim, (uint32_t)t, &tier) != 0)
        return raise_srl(SRL_EINVAL, "srl_tier_get");
    if (key_get(key, &k) < 0)
        return NULL;
    memset(&d, 0, sizeof d);
    rc = srl_acquire_tier(self->lim, (uint32_t)t, k.data, k.len, (uint32_t)cost, &d);
    key_release(&k);
    return ban_started(op, key, &tier.limits, decided(self, &tier.limits, rc, &d, "srl_acquire", cost));
}

/* reserve(key, max_wait_ns, cost=1): srl_reserve; the caller sleeps
 * decision.wait_ns before acting (or refunds the cost). */
static PyObject *Limiter_reserve(PyObject *op, PyObject *args, PyObject *kw)
{
    LimiterObject *self = (LimiterObject *)op;
    static char *kwlist[] = {"key", "max_wait_ns", "cost", NULL};
    PyObject *key;
    unsigned long long max_wait, cost = 1;
    key_view k;
    srl_decision d;

    if (check_open(self) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kw, "OO&|O&:reserve", kwlist, &key, to_u64,
                                     &max_wait, to_u64, &cost))
        return NULL;
    if (cost > UINT32_MAX)
        return raise_srl(SRL_ECOST, "cost above 2**32-1");
    if (key_get(key, &k) < 0)
        return NULL;
    memset(&d, 0, sizeof d);
    int rc = srl_reserve(self->lim, k.data, k.len, (uint32_t)cost, max_wait, &d);
    key_release(&k);
    return ban_started(op, key, &self->limits, decided(self, &self->limits, rc, &d, "srl_reserve", cost));
}

static PyObject *Limiter_peek(PyObject *op, PyObject *args, PyObject *kw)
{
    LimiterObject *self = (LimiterObject *)op;
    key_view k;
    unsigned long long cost;
    srl_decision d;
    int rc;

    if (check_open(self) < 0 || parse_key_cost(args, kw, "O|O&:peek", &k, &cost) < 0)
        return NULL;
    rc = srl_peek(self->lim, k.data, k.len, (uint32_t)cost, &d);
    key_release(&k);
    if (rc == SRL_ENOENT)
        Py_RETURN_NONE;
    if (rc < 0)
        return raise_on(self, rc, "srl_peek", NULL);
    return decision_new(&d, &self->limits);
}

/* srl_enter: (Decision, lease) with the lease an opaque bytes value of
 * sizeof(srl_lease) (None when denied); srl_leave takes it back. */
static PyObject *Limiter_enter_unit(PyObject *op, PyObject *key)
{
    LimiterObject *self = (LimiterObject *)op;
    key_view k;
    srl_decision d;
    srl_lease lease;
    int rc;

    if (check_open(self) < 0 || key_get(key, &k) < 0)
        return NULL;
    rc = srl_enter(self->lim, k.data, k.len, &lease, &d);
    key_release(&k);
    if (rc < 0)
        return raise_on(self, rc, "srl_enter", NULL);
    PyObject *dec = decision_new(&d, &self->limits);
    if (dec == NULL)
        return NULL;
    PyObject *l = lease.gen != 0 ? PyBytes_FromStringAndSize((const char *)&lease, sizeof lease)
                                 : (Py_INCREF(Py_None), Py_None);
    if (l == NULL) {
        Py_DECREF(dec);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(2, dec, l);
    Py_DECREF(dec);
    Py_DECREF(l);
    return t;
}

static PyObject *Limiter_leave(PyObject *op, PyObject *arg)
{
    LimiterObject *self = (LimiterObject *)op;
    srl_lease lease;
    if (check_open(self) < 0)
        return NULL;
    if (!PyBytes_Check(arg) || PyBytes_GET_SIZE(arg) != (Py_ssize_t)sizeof lease) {
        PyErr_SetString(PyExc_TypeError, "leave() takes the lease enter() returned");
        return NULL;
    }
    memcpy(&lease, PyBytes_AS_STRING(arg), sizeof lease);
    int rc = srl_leave(self->lim, &lease);
    if (rc == SRL_ENOENT)
        Py_RETURN_FALSE;   /* left already, or reclaimed: nothing released twice */
    if (rc < 0)
        return raise_on(self, rc, "srl_leave", NULL);
    Py_RETURN_TRUE;
}

static PyObject *Limiter_reset(PyObject *op, PyObject *key)
{
    LimiterObject *self = (LimiterObject *)op;
    key_view k;
    int rc;

    if (check_open(self) < 0 || key_get(key, &k) < 0)
        return NULL;
    rc = srl_reset_key(self->lim, k.data, k.len);
    key_release(&k);
    if (rc == SRL_ENOENT)
        Py_RETURN_FALSE;
    if (rc < 0)
        return raise_on(self, rc, "srl_reset_key", NULL);
    Py_RETURN_TRUE;
}

/* exempt(key, on=True): srl_key_exempt (shared and anonymous stores). */
static PyObject *Limiter_exempt(PyObject *op, PyObject *args, PyObject *kw)
{
    LimiterObject *self = (LimiterObject *)op;
    static char *kwlist[] = {"key", "on", NULL};
    PyObject *key;
    int on = 1;
    key_view k;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p", kwlist, &key, &on))
        return NULL;
    if (check_open(self) < 0 || key_get(key, &k) < 0)
        return NULL;
    int rc = srl_key_exempt(self->lim, k.data, k.len, on);
    key_release(&k);
    if (rc < 0)
        return raise_srl(rc, "srl_key_exempt");
    Py_RETURN_NONE;
}

static PyObject *Limiter_evict_idle(PyObject *op, PyObject *unused)
{
    LimiterObject *self = (LimiterObject *)op;
    int64_t n;

    (void)unused;
    if (check_open(self) < 0)
        return NULL;
    n = srl_evict_idle(self->lim);
    if (n < 0)
        return raise_on(self, (int)n, "srl_evict_idle", NULL);
    return PyLong_FromLongLong(n);
}

static int dict_set_u64(PyObject *d, const char *name, uint64_t v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    int rc;
    if (o == NULL)
        return -1;
    rc = PyDict_SetItemString(d, name, o);
    Py_DECREF(o);
    return rc;
}

/* info()'s booleans: whether srl_info.flags lists bit, i.e. whether that
 * SRL_CONFIG_* option took effect, not merely whether it was asked for. */
static int dict_set_flag(PyObject *d, const char *name, uint32_t flags, uint32_t bit)
{
    return PyDict_SetItemString(d, name, (flags & bit) ? Py_True : Py_False);
}

static PyObject *Limiter_stats(PyObject *op, PyObject *unused)
{
    LimiterObject *self = (LimiterObject *)op;
    srl_stats s;
    PyObject *d;
    int rc;

    (void)unused;
    if (check_open(self) < 0)
        return NULL;
    rc = srl_stats_get(self->lim, &s);
    if (rc < 0)
        return raise_on(self, rc, "srl_stats_get", NULL);
    d = PyDict_New();
    if (d == NULL)
        return NULL;
    if (dict_set_u64(d, "capacity", s.capacity) < 0 || dict_set_u64(d, "used", s.used) < 0 ||
        dict_set_u64(d, "allowed", s.allowed) < 0 || dict_set_u64(d, "denied", s.denied) < 0 ||
        dict_set_u64(d, "full", s.full) < 0 || dict_set_u64(d, "recovered", s.recovered) < 0 ||
        dict_set_u64(d, "reset_slots", s.reset_slots) < 0 ||
        dict_set_u64(d, "evicted", s.evicted) < 0 || dict_set_u64(d, "timeouts", s.timeouts) < 0 ||
        dict_set_u64(d, "local_denied", s.local_denied) < 0 ||
        dict_set_u64(d, "would_deny", s.would_deny) < 0 ||
        dict_set_u64(d, "exempt", s.exempt) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *Limiter_info(PyObject *op, PyObject *unused)
{
    LimiterObject *self = (LimiterObject *)op;
    srl_info in;
    char pol[SRL_LIMITS_TEXT_MAX];
    PyObject *d, *v;
    int rc;

    (void)unused;
    if (check_open(self) < 0)
        return NULL;
    rc = srl_info_get(self->lim, &in);
    if (rc < 0)
        return raise_on(self, rc, "srl_info_get", NULL);
    if (srl_limits_format(&in.limits, pol, sizeof pol) < 0)
        pol[0] = '\0';
    d = PyDict_New();
    if (d == NULL)
        return NULL;
    v = PyUnicode_FromString(pol);
    if (v == NULL || PyDict_SetItemString(d, "policy", v) < 0 ||
        dict_set_u64(d, "capacity", in.capacity) < 0 ||
        dict_set_u64(d, "key_display", in.key_display) < 0 ||
        dict_set_u64(d, "tier_count", in.tier_count) < 0 ||
        dict_set_u64(d, "policy_gen", in.policy_gen) < 0 ||
        dict_set_u64(d, "layout_version", in.layout_version) < 0 ||
        dict_set_u64(d, "flags", in.flags) < 0 ||
        dict_set_flag(d, "lockfree", in.flags, SRL_CONFIG_LOCKFREE) < 0 ||
        dict_set_flag(d, "flood_cache", in.flags, SRL_CONFIG_FLOOD_CACHE) < 0 ||
        dict_set_flag(d, "dry_run", in.flags, SRL_CONFIG_DRY_RUN) < 0) {
        Py_XDECREF(v);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(v);
    return d;
}

static PyObject *Limiter_close(PyObject *op, PyObject *unused)
{
    LimiterObject *self = (LimiterObject *)op;
    (void)unused;
    srl_close(self->lim);   /* NULL is a no-op: close() twice is harmless */
    self->lim = NULL;
    Py_RETURN_NONE;
}

static PyObject *Limiter_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    if (check_open((LimiterObject *)op) < 0)
        return NULL;
    Py_INCREF(op);
    return op;
}

static PyObject *Limiter_exit(PyObject *op, PyObject *args)
{
    (void)args;
    return Limiter_close(op, NULL);
}

static PyObject *Limiter_get_policy(PyObject *op, void *c)
{
    (void)c;
    return policy_text(&((LimiterObject *)op)->limits);
}

static PyObject *Limiter_get_kind(PyObject *op, void *c)
{
    static const char *const kinds[] = {"shared", "anonymous", "local", "redis", "fronted"};
    unsigned k = (unsigned)((LimiterObject *)op)->kind;
    (void)c;
    return PyUnicode_FromString(k < sizeof kinds / sizeof kinds[0] ? kinds[k] : "unknown");
}

static PyObject *Limiter_get_name(PyObject *op, void *c)
{
    (void)c;
    return Py_NewRef(((LimiterObject *)op)->name);
}

static PyObject *Limiter_get_closed(PyObject *op, void *c)
{
    (void)c;
    return PyBool_FromLong(((LimiterObject *)op)->lim == NULL);
}

static void Limiter_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    srl_close(((LimiterObject *)op)->lim);
    Py_XDECREF(((LimiterObject *)op)->name);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *Limiter_new_refused(PyTypeObject *t, PyObject *a, PyObject *k)
{
    (void)t; (void)a; (void)k;
    PyErr_SetString(PyExc_TypeError,
                    "use srl.Limiter.shared(), .fronted(), .redis(), .anonymous() or .local() to "
                    "open a limiter");
    return NULL;
}

static PyMethodDef Limiter_methods[] = {
    {"shared", (PyCFunction)(void (*)(void))Limiter_shared,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "shared(name, policy, capacity=65536, key_display=0, on_full='allow', create=True,\n"
     "       exclusive=False, *, lock_timeout_ms=1000, mode=0o600, dry_run=False,\n"
     "       tiers=None, change=False, lockfree=False, flood_cache=False)\n"
     "tiers: {name: policy} beside policy (tier 'default'), see acquire(tier=).\n"
     "change=True: an existing segment with another policy (same capacity, key_display\n"
     "and tier names) is given this one, live, each key keeping its use (a key that\n"
     "used 10 of 10 gets 10 more when the limit becomes 20); without it, MismatchError.\n"
     "Open (or create) the host-wide segment /dev/shm/NAME.  With create=False the\n"
     "policy may be None: the segment's policy, capacity, key_display and on_full are\n"
     "adopted (the other arguments are then ignored).  dry_run=True: never refuse\n"
     "(SRL_CONFIG_DRY_RUN): a would-be denial is allowed with decision.would_deny\n"
     "True and counted in stats()['would_deny']; this handle's choice only.\n"
     "lockfree=True (SRL_CONFIG_LOCKFREE): a key found under a gcra tier is decided\n"
     "with one compare-and-swap, no bucket lock; the same answers.  flood_cache=True\n"
     "(SRL_CONFIG_FLOOD_CACHE): a key this handle saw denied is answered from a\n"
     "private copy while nothing changes it; those denials reach the segment's\n"
     "counts later (at this handle's next locked decision in that bucket, its\n"
     "stats() or close()).  Both per handle, like dry_run."},
    {"redis", (PyCFunction)(void (*)(void))Limiter_redis,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "redis(uri, policy=None, on_full='allow', *, lock_timeout_ms=1000, dry_run=False,\n"
     "      tiers=None)\n"
     "The limit in a Redis server (srl_open_redis; uri: redis://[:password@]host:port[/db]\n"
     "?prefix=P&timeout_ms=N, unix:///path?..., redis-cluster://host:port,...): one\n"
     "limit for every host that opens the same server and prefix.  policy None: the\n"
     "store's own is adopted.  Opens while Redis is down (it decides by on_full, the\n"
     "decision flagged FLAG_DEGRADED, until Redis answers).  Errors name the server and\n"
     "what happened (srl_last_error), never the password.  kind 'redis'."},
    {"fronted", (PyCFunction)(void (*)(void))Limiter_fronted,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "fronted(name, uri, policy, capacity=65536, key_display=0, on_full='allow',\n"
     "        create=True, exclusive=False, *, lock_timeout_ms=1000, mode=0o600,\n"
     "        dry_run=False, tiers=None)\n"
     "The fleet's limit on Redis (as redis()) with the host segment /dev/shm/NAME in\n"
     "front (srl_open_fronted): a key Redis denied is answered on the host until its\n"
     "denial ends (FLAG_LOCAL), with no round trip.  shared(name, \"POLICY redis=URI\")\n"
     "is the same.  kind 'fronted'."},
    {"anonymous", (PyCFunction)(void (*)(void))Limiter_anonymous,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "anonymous(policy, capacity=65536, key_display=0, on_full='allow', *, lock_timeout_ms=1000,\n"
     "          dry_run=False, tiers=None, lockfree=False, flood_cache=False)\n"
     "A table in an anonymous shared mapping: create it, then fork the workers."},
    {"local", (PyCFunction)(void (*)(void))Limiter_local,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "local(policy, capacity=65536, key_display=0, on_full='allow', *, lock_timeout_ms=1000,\n"
     "      dry_run=False, lockfree=False, flood_cache=False)\n"
     "lockfree=True: a found key of a gcra policy is decided with one compare-and-swap\n"
     "of its state, no mutex; flood_cache is accepted and changes nothing here.\n"
     "An in-process store; create it after fork, in the process that uses it."},
    {"acquire", (PyCFunction)(void (*)(void))Limiter_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(key, cost=1, *, tier=None) -> Decision.  key: str (UTF-8) or bytes.\n"
     "tier: a tier's name (tiers= of the opener); a key of another tier moves to it,\n"
     "keeping its use (capped at the tier's limit); an unknown name: NotFoundError."},
    {"reserve", (PyCFunction)(void (*)(void))Limiter_reserve, METH_VARARGS | METH_KEYWORDS,
     "reserve(key, max_wait_ns, cost=1) -> Decision.  Admitted within max_wait_ns: the\n"
     "permits are taken for the instant now + decision.wait_ns; sleep that long, then act.\n"
     "max_wait_ns 0 is acquire(); srl.Error ENOTSUP where the policy cannot wait."},
    {"peek", (PyCFunction)(void (*)(void))Limiter_peek, METH_VARARGS | METH_KEYWORDS,
     "peek(key, cost=1) -> Decision, or None if the key is not tracked; changes nothing."},
    {"reset", Limiter_reset, METH_O, "reset(key) -> True if the key was tracked (it starts fresh)."},
    {"refund", (PyCFunction)(void (*)(void))Limiter_refund, METH_VARARGS | METH_KEYWORDS,
     "refund(key, cost=1) -> True, or False if the key is not tracked (nothing to give back).\n"
     "Gives back cost permits an admitted request took (srl_refund: never above a fresh\n"
     "key's), on every store but a concurrency limit's (leave() gives a unit back)."},
    {"enter", Limiter_enter_unit, METH_O,
     "enter(key) -> (Decision, lease): one unit of a concurrency limit; lease is None when\n"
     "denied.  Give it back with leave(lease) (srl.holding() does both)."},
    {"leave", Limiter_leave, METH_O,
     "leave(lease) -> True, or False if it was left already or reclaimed."},
    {"exempt", (PyCFunction)(void (*)(void))Limiter_exempt, METH_VARARGS | METH_KEYWORDS,
     "exempt(key, on=True): srl_key_exempt; the key is never refused (its decisions counted\n"
     "in stats()['exempt']) until exempt(key, False).  Shared and anonymous limiters only."},
    {"evict_idle", Limiter_evict_idle, METH_NOARGS,
     "evict_idle() -> number of at-rest states dropped."},
    {"stats", Limiter_stats, METH_NOARGS, "stats() -> dict of the srl_stats counters."},
    {"info", Limiter_info, METH_NOARGS,
     "info() -> dict: policy (the current one, as text), capacity, key_display, tier_count,\n"
     "policy_gen (one more per live change: shared(change=True), rlctl set-policy),\n"
     "layout_version (0 for the local store), flags (srl_info.flags: the SRL_CONFIG_*\n"
     "bits that took effect in this handle's store) and, from it, lockfree, flood_cache\n"
     "and dry_run: True only where the option is in force, e.g. lockfree=True is False\n"
     "on a token_bucket segment (no gcra tier) and flood_cache=True False on local()."},
    {"close", Limiter_close, METH_NOARGS, "Close the handle (the segment stays)."},
    {"__enter__", Limiter_enter, METH_NOARGS, NULL},
    {"__exit__", Limiter_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Limiter_getset[] = {
    {.name = "policy", .get = Limiter_get_policy, .doc = "canonical text of the policy"},
    {.name = "kind", .get = Limiter_get_kind, .doc = "'shared', 'anonymous', 'local', 'redis' or 'fronted'"},
    {.name = "closed", .get = Limiter_get_closed, .doc = "True after close()"},
    {.name = "name", .get = Limiter_get_name,
     .doc = "the RateLimit-Policy name mod_srl and PHP give it: the segment's name without "
            "'/' (a fronted store's host segment, a Redis store's prefix); None for anonymous "
            "and local (srl.headers: \"default\")"},
    {.name = NULL},
};

static PyType_Slot Limiter_slots[] = {
    {Py_tp_dealloc, Limiter_dealloc},
    {Py_tp_new, Limiter_new_refused},
    {Py_tp_methods, Limiter_methods},
    {Py_tp_getset, Limiter_getset},
    {Py_tp_doc, "A handle on one srl limiter (see include/srl.h)."},
    {0, NULL},
};

static PyType_Spec Limiter_spec = {
    .name = "srl.Limiter",
    .basicsize = sizeof(LimiterObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = Limiter_slots,
};

/* ---------------------------------------------------------- headers */

static PyObject *pair(const char *name, const char *value)
{
    return Py_BuildValue("(ss)", name, value);
}

static PyObject *headers(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"decision", "name", NULL};
    PyObject *dobj, *list, *item;
    const char *name = NULL;
    char buf[1024];   /* four limits' RateLimit-Policy items */
    const DecisionObject *d;
    int n;

    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|z:headers", kwlist, Decision_type, &dobj,
                                     &name))
        return NULL;
    d = (const DecisionObject *)dobj;
    list = PyList_New(0);
    if (list == NULL)
        return NULL;
    n = srl_format_ratelimit_policies(&d->limits, name, buf, sizeof buf);
    if (n < 0)
        goto srl_fail;
    if ((item = pair("RateLimit-Policy", buf)) == NULL || PyList_Append(list, item) < 0)
        goto py_fail;
    Py_DECREF(item);
    n = srl_format_ratelimit_binding(&d->limits, &d->d, name, buf, sizeof buf);
    if (n < 0)
        goto srl_fail;
    if ((item = pair("RateLimit", buf)) == NULL || PyList_Append(list, item) < 0)
        goto py_fail;
    Py_DECREF(item);
    if (!d->d.allowed) {
        n = srl_format_retry_after(&d->d, buf, sizeof buf);
        if (n < 0)
            goto srl_fail;
        if ((item = pair("Retry-After", buf)) == NULL || PyList_Append(list, item) < 0)
            goto py_fail;
        Py_DECREF(item);
    }
    return list;
srl_fail:
    Py_DECREF(list);
    if (n == SRL_EINVAL && name != NULL) {
        char what[120];
        snprintf(what, sizeof what, "headers(): name '%.60s' (want a token of [A-Za-z0-9_.-])",
                 name);
        return raise_srl(n, what);
    }
    return raise_srl(n, "headers()");
py_fail:
    Py_XDECREF(item);
    Py_DECREF(list);
    return NULL;
}

static PyObject *strerror_py(PyObject *self, PyObject *arg)
{
    long code = PyLong_AsLong(arg);
    (void)self;
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(srl_strerror((int)code));
}

static PyObject *unlink_py(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    char what[300];
    int rc;

    (void)self;
    if (name == NULL)
        return NULL;
    rc = srl_unlink(name);
    if (rc < 0) {
        snprintf(what, sizeof what, "srl_unlink('%.200s')", name);
        return raise_srl(rc, what);
    }
    Py_RETURN_NONE;
}

/* srl_key_fit: the key itself (1..SRL_KEY_MAX bytes), bytes of its fitted
 * form (longer), or None (empty): the middlewares' rule (srl.h). */
static PyObject *key_fit_py(PyObject *self, PyObject *obj)
{
    key_view k;
    PyObject *out;

    (void)self;
    if (key_get(obj, &k) < 0)
        return NULL;
    size_t len = k.len;
    if (len == 0)
        out = Py_NewRef(Py_None);
    else if (len <= SRL_KEY_MAX)
        out = Py_NewRef(obj);
    else {
        out = PyBytes_FromStringAndSize(NULL, SRL_KEY_MAX);
        if (out != NULL)
            (void)srl_key_fit(k.data, &len, (unsigned char *)PyBytes_AS_STRING(out));
    }
    key_release(&k);
    return out;
}

/* ------------------------------------------------ address keys, ranges
 * Thin shells over srl_key_ip / srl_cidr_* (src/http/keyip.c): the same bytes
 * as mod_srl, nginx and PHP make of an address.  A bad address or range is
 * ValueError naming it (an exception a request handler may catch), not an
 * srl.Error: it is the caller's input, not the library's state. */

static PyObject *ip_key_py(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"addr", "v4", "v6", NULL};
    const char *addr;
    unsigned v4 = 32, v6 = 64;
    char buf[SRL_KEY_IP_MAX];

    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|II", kwlist, &addr, &v4, &v6))
        return NULL;
    if (v4 > 32 || v6 > 128)
        return PyErr_Format(PyExc_ValueError, "ip_key: prefixes are v4 0..32 and v6 0..128, "
                            "not v4=%u v6=%u", v4, v6);
    int n = srl_key_ip(addr, v4, v6, buf, sizeof buf);
    if (n < 0)
        return PyErr_Format(PyExc_ValueError, "ip_key: '%.64s' is not an IPv4 or IPv6 address "
                            "(dotted quad or RFC 4291 text; no port, brackets or zone)", addr);
    return PyUnicode_FromStringAndSize(buf, n);
}

/* The range text in its canonical form, or ValueError. */
static PyObject *cidr_py(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *text = PyUnicode_AsUTF8(arg);
    srl_cidr c;
    char buf[SRL_KEY_IP_MAX];
    if (text == NULL)
        return NULL;
    if (srl_cidr_parse(text, &c) != 0)
        return PyErr_Format(PyExc_ValueError, "'%.64s' is not an address range: give ADDRESS or "
                            "ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the address with no "
                            "bits set past the prefix", text);
    int n = srl_cidr_format(&c, buf, sizeof buf);
    return n < 0 ? raise_srl(n, "srl_cidr_format") : PyUnicode_FromStringAndSize(buf, n);
}

static PyObject *cidr_match_py(PyObject *self, PyObject *args)
{
    const char *range, *addr;
    srl_cidr c;

    (void)self;
    if (!PyArg_ParseTuple(args, "ss", &range, &addr))
        return NULL;
    if (srl_cidr_parse(range, &c) != 0)
        return PyErr_Format(PyExc_ValueError, "'%.64s' is not an address range", range);
    int m = srl_cidr_match(&c, addr);
    if (m < 0)
        Py_RETURN_FALSE;   /* not an address: in no range */
    return PyBool_FromLong(m);
}

/* ----------------------------------------------------------- module */

static PyMethodDef module_methods[] = {
    {"headers", (PyCFunction)(void (*)(void))headers, METH_VARARGS | METH_KEYWORDS,
     "headers(decision, name=None) -> [(field, value), ...]: RateLimit-Policy and RateLimit,\n"
     "plus Retry-After when denied.  name: the policy's token (default \"default\")."},
    {"unlink", unlink_py, METH_O,
     "unlink(name): remove the segment's name; processes that have it open keep using it."},
    {"strerror", strerror_py, METH_O, "strerror(code) -> srl_strerror(code)."},
    {"key_fit", key_fit_py, METH_O,
     "key_fit(key) -> key, bytes or None: srl_key_fit, the one rule of every binding for a\n"
     "client's key.  1..KEY_MAX bytes (str as UTF-8): the key itself; longer: its fitted\n"
     "form (KEY_MAX bytes: the head, then BLAKE2b-256 of the whole key, the same in every\n"
     "process, host and binding); empty: None (srl.wsgi does not limit such a request)."},
    {"ip_key", (PyCFunction)(void (*)(void))ip_key_py, METH_VARARGS | METH_KEYWORDS,
     "ip_key(addr, v4=32, v6=64) -> str: srl_key_ip, the key of the address's prefix\n"
     "(\"192.0.2.0/24\", \"2001:db8::/64\"; ::ffff:a.b.c.d counts as IPv4).  ValueError for\n"
     "an address that does not parse or a prefix out of range."},
    {"cidr", cidr_py, METH_O,
     "cidr(text) -> str: the range in srl's form (srl_cidr_parse, srl_cidr_format),\n"
     "\"10.0.0.0/8\"; ValueError for a bad range (host bits set included)."},
    {"cidr_match", cidr_match_py, METH_VARARGS,
     "cidr_match(range, addr) -> bool: srl_cidr_match; an addr that is no address is in no\n"
     "range.  ValueError for a bad range."},
    {"_set_ban_hook", set_ban_hook, METH_O,
     "_set_ban_hook(fn or None): fn(limiter, key, policy, decision) on each decision that\n"
     "started a penalty= ban (called once by srl/__init__.py, which logs it)."},
    {"_register_errors", register_errors, METH_VARARGS,
     "_register_errors(base, {code: class}) (called once by srl/__init__.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef srl_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "srl._srl",
    .m_doc = "C binding of libsrl; use the package srl.",
    .m_size = -1,
    .m_methods = module_methods,
};

static int add_int(PyObject *m, const char *name, long v)
{
    return PyModule_AddIntConstant(m, name, v);
}

PyMODINIT_FUNC PyInit__srl(void)
{
    PyObject *m = PyModule_Create(&srl_module);
    int i;

    if (m == NULL)
        return NULL;
    Decision_type = (PyTypeObject *)PyType_FromSpec(&Decision_spec);
    if (Decision_type == NULL || PyModule_AddObjectRef(m, "Decision", (PyObject *)Decision_type) < 0)
        goto fail;
    Limiter_type = (PyTypeObject *)PyType_FromSpec(&Limiter_spec);
    if (Limiter_type == NULL || PyModule_AddObjectRef(m, "Limiter", (PyObject *)Limiter_type) < 0)
        goto fail;
    for (i = 1; i < (int)(sizeof code_names / sizeof code_names[0]); i++)
        if (add_int(m, code_names[i], -i) < 0)
            goto fail;
    if (add_int(m, "FLAG_UNTRACKED", SRL_DECISION_UNTRACKED) < 0 ||
        add_int(m, "FLAG_DEGRADED", SRL_DECISION_DEGRADED) < 0 ||
        add_int(m, "FLAG_LOCAL", SRL_DECISION_LOCAL) < 0 ||
        add_int(m, "FLAG_WOULD_DENY", SRL_DECISION_WOULD_DENY) < 0 ||
        add_int(m, "FLAG_BAN_STARTED", SRL_DECISION_BAN_STARTED) < 0 ||
        add_int(m, "KEY_MAX", SRL_KEY_MAX) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
