/*
 * policy.c - a policy's text form (parse, format), its validation, and the
 * table from srl_algorithm to the algorithm vtables.
 *
 * Grammar (no whitespace anywhere):
 *     policy  = [ algo ":" ] permits "/" [ count ] unit
 *     algo    = "token_bucket" | "sliding_log" | "sliding_counter" | "gcra"
 *             | "fixed_window"
 *     permits = 1*DIGIT            1 .. 2^32-1
 *     count   = 1*DIGIT            > 0 (default 1)
 *     unit    = "ns" | "us" | "ms" | "s" | "m" | "h" | "d"
 * Every overflow (of permits, of count, of count * unit) is SRL_EPOLICY,
 * as is any result srl_policy_validate() refuses.  srl_policy_parse_ex()
 * says which part is bad: each check of the grammar above fails with its
 * own message and the span it refers to, in the order the text is read, so
 * the first bad part is the one reported.  The formatter writes the
 * canonical form "algo:N/<count><unit>" with the largest unit that divides
 * the window exactly, so parse(format(p)) == p for every valid p.
 *
 * Pure functions over their arguments: no state, safe from any thread.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "config.h"

static const struct srl__algo *const algos[] = {
    [SRL_TOKEN_BUCKET] = &srl__algo_token_bucket,
    [SRL_SLIDING_LOG] = &srl__algo_sliding_log,
    [SRL_SLIDING_COUNTER] = &srl__algo_sliding_counter,
    [SRL_GCRA] = &srl__algo_gcra,
    [SRL_CONCURRENCY] = &srl__algo_concurrency,
    [SRL_FIXED_WINDOW] = &srl__algo_fixed_window,
};

#define N_ALGOS (sizeof algos / sizeof algos[0])

const struct srl__algo *srl__algo_get(srl_algorithm a)
{
    /* Compared as unsigned: a corrupt or foreign value may be negative. */
    if ((unsigned)a >= N_ALGOS)
        return NULL;
    return algos[a];
}

const char *srl_algorithm_name(srl_algorithm a)
{
    const struct srl__algo *al = srl__algo_get(a);
    return al ? al->name : NULL;
}

int srl_policy_validate(const srl_policy *p)
{
    if (p == NULL)
        return SRL_EINVAL;
    if (srl__algo_get(p->algorithm) == NULL)
        return SRL_EPOLICY;
    if (p->permits < 1 || p->penalty_ns > SRL_WINDOW_MAX_NS)
        return SRL_EPOLICY;
    /* An escalating penalty: MIN first, so MAX (whole seconds) above it. */
    if (p->penalty_max_s != 0 &&
        (p->penalty_ns == 0 || (uint64_t)p->penalty_max_s * SRL_NS_PER_S <= p->penalty_ns ||
         (uint64_t)p->penalty_max_s * SRL_NS_PER_S > SRL_WINDOW_MAX_NS))
        return SRL_EPOLICY;
    if (p->penalty_ns != 0 && p->algorithm == SRL_CONCURRENCY)
        return SRL_EPOLICY;   /* a unit limit denies no one for long: it has no ban */
    if (p->burst != 0) {
        /* Only the bucket algorithms have a capacity apart from their rate,
         * and a full burst must refill within the longest window. */
        if (p->algorithm != SRL_TOKEN_BUCKET && p->algorithm != SRL_GCRA)
            return SRL_EPOLICY;
        if ((unsigned __int128)p->burst * p->window_ns >
            (unsigned __int128)SRL_WINDOW_MAX_NS * p->permits)
            return SRL_EPOLICY;
    }
    if (p->algorithm == SRL_CONCURRENCY) {
        /* window_ns is max_hold there, 0 meaning none. */
        if (p->permits > SRL_CONCURRENCY_MAX || p->window_ns > SRL_WINDOW_MAX_NS)
            return SRL_EPOLICY;
        return 0;
    }
    if (p->window_ns < 1 || p->window_ns > SRL_WINDOW_MAX_NS)
        return SRL_EPOLICY;
    if (p->algorithm == SRL_SLIDING_LOG && p->permits > SRL_SLIDING_LOG_PERMITS_MAX)
        return SRL_EPOLICY;
    return 0;
}

/* Units, largest first (the formatter's search order). */
static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"d", 86400 * SRL_NS_PER_S},
    {"h", 3600 * SRL_NS_PER_S},
    {"m", 60 * SRL_NS_PER_S},
    {"s", SRL_NS_PER_S},
    {"ms", 1000000ull},
    {"us", 1000ull},
    {"ns", 1ull},
};

#define N_UNITS (sizeof units / sizeof units[0])

/* Unit names for messages, smallest first. */
#define UNITS_LIST "ns us ms s m h d"
#define ALGOS_LIST "token_bucket sliding_log sliding_counter gcra concurrency fixed_window"

/*
 * Where and why a parse failed.  fail() records the span [at, at+len) of
 * the text and formats the message; the bad part itself is quoted by
 * srl__quote() (config.h), which escapes every byte outside printable ASCII as \xNN so a
 * message never carries control characters to a terminal or a log.
 */
struct perr {
    srl_policy_error *e;
    const char *text;
};

void srl__quote(char *buf, size_t len, const char *s, size_t n)
{
    size_t o = 0;
    size_t lim = n > SRL__QUOTE_MAX ? SRL__QUOTE_MAX : n;
    for (size_t i = 0; i < lim && o + 5 < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
    }
    if (n > lim && o + 4 < len) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
}

/* config.h */
void srl__perr_vset(srl_policy_error *e, size_t off, size_t len, const char *fmt, va_list ap)
{
    e->offset = (uint32_t)off;
    e->length = (uint32_t)len;
    vsnprintf(e->message, sizeof e->message, fmt, ap);
}

__attribute__((format(printf, 4, 5)))
static int fail(struct perr *pe, const char *at, size_t len, const char *fmt, ...)
{
    if (pe->e != NULL) {
        va_list ap;
        va_start(ap, fmt);
        srl__perr_vset(pe->e, (size_t)(at - pe->text), len, fmt, ap);
        va_end(ap);
    }
    return SRL_EPOLICY;
}

/* config.h */
unsigned srl__edit_distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b);
    unsigned row[65];
    for (size_t j = 0; j <= m; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= m; j++) {
            unsigned up = row[j];
            char ca = a[i - 1];
            if (ca >= 'A' && ca <= 'Z')
                ca = (char)(ca - 'A' + 'a');
            unsigned best = diag + (ca == b[j - 1] ? 0u : 1u);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

/* The algorithm name closest to s[0..n), if it is close enough to be a
 * likely typo (at most a third of the name's letters wrong), else NULL. */
static const char *suggest(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return NULL;
    const char *best = NULL;
    unsigned best_d = UINT32_MAX;
    for (unsigned a = 0; a < N_ALGOS; a++) {
        unsigned d = srl__edit_distance(s, n, algos[a]->name);
        unsigned lim = (unsigned)strlen(algos[a]->name) / 3;
        if (d <= (lim ? lim : 1) && d < best_d) {
            best = algos[a]->name;
            best_d = d;
        }
    }
    return best;
}

/* Reads 1*DIGIT at *s into *v; advances *s past every digit.  Returns 0,
 * or 1 if the value is above max (or overflows 64 bits). */
static int parse_uint(const char **s, uint64_t max, uint64_t *v)
{
    const char *c = *s;
    uint64_t x = 0;
    int over = 0;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, (uint64_t)(*c - '0'), &x))
            over = 1;
        if (x > max)
            over = 1;
    }
    *s = c;
    *v = x;
    return over;
}

static int is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (c >= '0' && c <= '9');
}

/* The srl unit for an English unit word as limits/Flask-Limiter users write
 * it ("minute", "seconds", "hr"), or NULL: only a hint in messages. */
static const char *unit_for_word(const char *w, size_t n)
{
    static const struct {
        const char *word;
        const char *unit;
    } words[] = {
        {"second", "s"}, {"seconds", "s"}, {"sec", "s"}, {"secs", "s"},
        {"minute", "m"}, {"minutes", "m"}, {"min", "m"}, {"mins", "m"},
        {"hour", "h"}, {"hours", "h"}, {"hr", "h"}, {"hrs", "h"},
        {"day", "d"}, {"days", "d"},
        {"millisecond", "ms"}, {"milliseconds", "ms"},
    };
    for (unsigned i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i].word) == n && srl__edit_distance(w, n, words[i].word) == 0)
            return words[i].unit;
    return NULL;
}

/* The unit named by up[0..ulen), in ns, or 0. */
static uint64_t unit_ns(const char *up, size_t ulen)
{
    for (unsigned u = 0; u < N_UNITS; u++)
        if (strlen(units[u].name) == ulen && memcmp(up, units[u].name, ulen) == 0)
            return units[u].ns;
    return 0;
}

/* "1.5s" at wp (integer part ip[0..), fraction after the '.'): writes the
 * same window with a whole count ("1500ms") to buf, or "" when there is
 * none (more than 9 fraction digits, an unknown unit, below 1ns). */
static void whole_count(char *buf, size_t len, const char *ip)
{
    buf[0] = '\0';
    uint64_t whole = 0, frac = 0, scale = 1;
    const char *c = ip;
    if (parse_uint(&c, UINT32_MAX, &whole) || *c != '.')
        return;
    for (c++; *c >= '0' && *c <= '9'; c++) {
        if (scale >= 1000000000ull)
            return;
        frac = frac * 10 + (uint64_t)(*c - '0');
        scale *= 10;
    }
    const char *up = c;
    while ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))
        c++;
    uint64_t unit = unit_ns(up, (size_t)(c - up));
    unsigned __int128 t = ((unsigned __int128)whole * scale + frac) * unit;
    if (unit == 0 || t % scale != 0 || t / scale == 0 || t / scale > SRL_WINDOW_MAX_NS)
        return;
    uint64_t ns = (uint64_t)(t / scale);
    for (unsigned u = 0; u < N_UNITS; u++)
        if (ns % units[u].ns == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(ns / units[u].ns), units[u].name);
            return;
        }
}

/* A window "[count]unit" at *sp: 0 with *ns set and *sp past it, or the
 * error (fail()).  what names it in messages ("window", "penalty"). */
static int parse_window(struct perr *pe, const char **sp, const char *what, uint64_t *ns)
{
    char q[4 * SRL__QUOTE_MAX + 8];
    const char *s = *sp;
    const char *wp = s;   /* [count] unit */
    uint64_t count = 1;
    int count_over = 0;
    if (*s >= '0' && *s <= '9') {
        count_over = parse_uint(&s, UINT64_MAX, &count);
        if (!count_over && count == 0 && *s != '.')
            return fail(pe, wp, (size_t)(s - wp), "%s must be 1ns or more", what);
    }
    const char *up = s;
    while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))
        s++;
    size_t ulen = (size_t)(s - up);
    if (ulen == 0) {
        if (up == wp)
            return strcmp(what, "window") == 0
                       ? fail(pe, up, *up ? 1 : 0, "expected a window after '/', e.g. 1m or 500ms")
                       : fail(pe, up, *up ? 1 : 0, "expected a %s time, e.g. 15m", what);
        if (*up == '.') {
            /* "1.5s": the count is whole; say the same window with one. */
            char w[32];
            whole_count(w, sizeof w, wp);
            const char *e = up + 1;
            while ((*e >= '0' && *e <= '9') || (*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z'))
                e++;
            srl__quote(q, sizeof q, wp, (size_t)(e - wp));
            if (w[0] != '\0')
                return fail(pe, wp, (size_t)(e - wp),
                            "the count in '%s' must be a whole number: write %s", q, w);
            return fail(pe, wp, (size_t)(e - wp),
                        "the count in '%s' must be a whole number, e.g. 1500ms", q);
        }
        return fail(pe, up, *up ? 1 : 0, "missing unit after the count (units: " UNITS_LIST ")");
    }
    uint64_t unit = unit_ns(up, ulen);
    if (unit == 0) {
        srl__quote(q, sizeof q, up, ulen);
        const char *hint = unit_for_word(up, ulen);
        if (hint != NULL)
            return fail(pe, up, ulen, "unknown unit '%s' (write %llu%s; units: " UNITS_LIST ")",
                        q, (unsigned long long)count, hint);
        return fail(pe, up, ulen, "unknown unit '%s' (units: " UNITS_LIST ")", q);
    }
    size_t wlen = (size_t)(s - wp);
    if (count_over || __builtin_mul_overflow(count, unit, ns) || *ns > SRL_WINDOW_MAX_NS) {
        srl__quote(q, sizeof q, wp, wlen);
        return fail(pe, wp, wlen, "%s %s above 3660d", what, q);
    }
    *sp = s;
    return 0;
}

/* No '/' after N at s.  "100 per minute" and "100 per 2 minutes" (limits'
 * and Flask-Limiter's form) get the srl form as the hint. */
static int fail_per(struct perr *pe, const char *s, unsigned long long n)
{
    static const char per[] = " per ";
    if (strncmp(s, per, sizeof per - 1) == 0) {
        const char *c = s + sizeof per - 1;
        uint64_t count = 1;
        if (*c >= '0' && *c <= '9') {
            if (parse_uint(&c, UINT32_MAX, &count) || *c != ' ' || count == 0)
                count = 0;
            else
                c++;
        }
        const char *w = c;
        while ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))
            c++;
        const char *u = unit_for_word(w, (size_t)(c - w));
        if (count != 0 && u != NULL && *c == '\0')
            return fail(pe, s, strlen(s), "expected '/' after N: srl writes '%llu per ...' as "
                        "%llu/%llu%s", n, n, (unsigned long long)count, u);
    }
    return fail(pe, s, *s ? 1 : 0, "expected '/' after N, e.g. 100/1m");
}

/* Text at s (a ',') after a complete policy: an option srl does not know
 * here.  A misspelt name gets a did-you-mean; burst= after penalty= the
 * order. */
static int fail_option(struct perr *pe, const char *s, srl_algorithm a)
{
    char q[4 * SRL__QUOTE_MAX + 8];
    const char *w = s + 1;
    const char *c = w;
    while (is_word(*c))
        c++;
    size_t n = (size_t)(c - w);
    size_t tlen = strlen(s);
    if (n > 0 && n <= 64 && *c == '=') {
        static const char *const opts[] = {"burst", "penalty", "max_hold"};
        unsigned first = a == SRL_CONCURRENCY ? 2 : 0, last = a == SRL_CONCURRENCY ? 3 : 2;
        srl__quote(q, sizeof q, w, n);
        for (unsigned i = first; i < last; i++)
            if (strlen(opts[i]) == n && memcmp(opts[i], w, n) == 0)
                return fail(pe, s, tlen, a == SRL_CONCURRENCY
                                             ? "option '%s' given twice"
                                             : "option '%s' given twice or out of order "
                                               "(burst= comes before penalty=)", q);
        for (unsigned i = first; i < last; i++) {
            /* a third of the letters, rounded up: "burts" (a swap) is 2 */
            unsigned lim = ((unsigned)strlen(opts[i]) + 2) / 3;
            if (srl__edit_distance(w, n, opts[i]) <= lim)
                return fail(pe, w, n, "unknown option '%s' (did you mean %s?)", q, opts[i]);
        }
        return fail(pe, w, n, a == SRL_CONCURRENCY ? "unknown option '%s' (options: max_hold=)"
                                                    : "unknown option '%s' (options: burst= penalty=)",
                    q);
    }
    srl__quote(q, sizeof q, s, tlen);
    return fail(pe, s, tlen, "trailing text '%s' after the policy", q);
}

/* "..MAX" at *sp after a penalty's MIN (p->penalty_ns): the longest ban
 * of an escalating penalty, whole seconds above MIN. */
static int parse_penalty_max(struct perr *pe, const char **sp, srl_policy *p)
{
    char q[4 * SRL__QUOTE_MAX + 8];
    const char *s = *sp + 2;
    const char *mp = s;
    uint64_t max;
    int rc = parse_window(pe, &s, "longest ban", &max);
    if (rc != 0)
        return rc;
    size_t mlen = (size_t)(s - mp);
    srl__quote(q, sizeof q, mp, mlen);
    if (max % SRL_NS_PER_S != 0)
        return fail(pe, mp, mlen, "the longest ban '%s' must be whole seconds, e.g. 1d", q);
    if (max <= p->penalty_ns)
        return fail(pe, mp, mlen, "the longest ban '%s' must be longer than the first (MIN..MAX, "
                    "e.g. penalty=1m..1d)", q);
    p->penalty_max_s = (uint32_t)(max / SRL_NS_PER_S);
    *sp = s;
    return 0;
}

int srl_policy_parse_ex(const char *text, srl_policy *out, srl_policy_error *err)
{
    if (err != NULL)
        memset(err, 0, sizeof *err);
    if (text == NULL || out == NULL) {
        if (err != NULL)
            snprintf(err->message, sizeof err->message, "no policy text given");
        return SRL_EINVAL;
    }
    struct perr pe = {err, text};
    char q[4 * SRL__QUOTE_MAX + 8];
    srl_policy p = {.algorithm = SRL_TOKEN_BUCKET};
    const char *s = text;

    if (*s == '\0')
        return fail(&pe, s, 0, "empty policy: expected ALGO:N/WINDOW, e.g. token_bucket:100/1m");

    /* An algorithm name starts with anything but a digit. */
    if (*s == ':')
        return fail(&pe, s, 0, "missing algorithm before ':' (algorithms: " ALGOS_LIST ")");
    if (is_word(*s) && !(*s >= '0' && *s <= '9')) {
        const char *w = s;
        while (is_word(*s))
            s++;
        size_t n = (size_t)(s - w);
        int found = -1;
        for (unsigned a = 0; a < N_ALGOS; a++)
            if (strlen(algos[a]->name) == n && memcmp(algos[a]->name, w, n) == 0)
                found = (int)a;
        if (found < 0) {
            srl__quote(q, sizeof q, w, n);
            const char *hint = suggest(w, n);
            if (hint != NULL)
                return fail(&pe, w, n, "unknown algorithm '%s' (did you mean %s?)", q, hint);
            /* The list leaves room for 16 bytes of the word (no name is
             * longer) within SRL_POLICY_ERROR_MAX. */
            if (n > 16) {
                srl__quote(q, sizeof q - 3, w, 16);
                strcat(q, "...");
            }
            return fail(&pe, w, n, "unknown algorithm '%s' (algorithms: " ALGOS_LIST ")", q);
        }
        if (*s != ':')
            return fail(&pe, s, *s ? 1 : 0,
                        "expected ':' after the algorithm, e.g. token_bucket:100/1m");
        p.algorithm = (srl_algorithm)found;
        s++;
    }

    const char *np = s;
    uint64_t permits;
    if (*s < '0' || *s > '9')
        return fail(&pe, s, *s ? 1 : 0, "expected N, a number 1..%u, e.g. 100/1m",
                    (unsigned)SRL_PERMITS_MAX);
    int over = parse_uint(&s, SRL_PERMITS_MAX, &permits);
    size_t nlen = (size_t)(s - np);
    srl__quote(q, sizeof q, np, nlen);
    if (over)
        return fail(&pe, np, nlen, "N %s above %u", q, (unsigned)SRL_PERMITS_MAX);
    if (permits == 0)
        return fail(&pe, np, nlen, "N must be 1 or more");
    if (p.algorithm == SRL_SLIDING_LOG && permits > SRL_SLIDING_LOG_PERMITS_MAX)
        return fail(&pe, np, nlen, "sliding_log N %s above %u (its state is 8 bytes per permit)",
                    q, SRL_SLIDING_LOG_PERMITS_MAX);
    if (p.algorithm == SRL_CONCURRENCY) {
        if (permits > SRL_CONCURRENCY_MAX)
            return fail(&pe, np, nlen, "concurrency N %s above %u (its state is 32 bytes per unit)",
                        q, SRL_CONCURRENCY_MAX);
        p.permits = (uint32_t)permits;
        if (*s == '\0') {
            p.window_ns = 0;   /* no max_hold */
            *out = p;
            return 0;
        }
        static const char mh[] = ",max_hold=";
        if (strncmp(s, mh, sizeof mh - 1) != 0)
            return fail(&pe, s, *s ? 1 : 0,
                        "expected ',max_hold=WINDOW' or the end after concurrency:N, "
                        "e.g. concurrency:4,max_hold=60s");
        s += sizeof mh - 1;
    } else {
        if (*s != '/')
            return fail_per(&pe, s, (unsigned long long)permits);
        s++;
    }

    int wrc = parse_window(&pe, &s, "window", &p.window_ns);
    if (wrc != 0)
        return wrc;
    p.permits = (uint32_t)permits;
    static const char bu[] = ",burst=";
    if (p.algorithm != SRL_CONCURRENCY && strncmp(s, bu, sizeof bu - 1) == 0) {
        if (p.algorithm != SRL_TOKEN_BUCKET && p.algorithm != SRL_GCRA)
            return fail(&pe, s, strlen(s), "burst= is for token_bucket and gcra (a %s has no "
                        "capacity apart from its rate)", srl_algorithm_name(p.algorithm));
        s += sizeof bu - 1;
        const char *bp = s;
        uint64_t burst;
        if (*s < '0' || *s > '9')
            return fail(&pe, s, *s ? 1 : 0, "expected a number after 'burst=', e.g. burst=20");
        int bover = parse_uint(&s, SRL_PERMITS_MAX, &burst);
        size_t blen = (size_t)(s - bp);
        srl__quote(q, sizeof q, bp, blen);
        if (bover || burst == 0)
            return fail(&pe, bp, blen, "burst %s must be 1..%u", q, (unsigned)SRL_PERMITS_MAX);
        p.burst = burst == permits ? 0 : (uint32_t)burst;
        if ((unsigned __int128)burst * p.window_ns >
            (unsigned __int128)SRL_WINDOW_MAX_NS * permits)
            return fail(&pe, bp, blen, "burst %s takes longer than 3660d to refill at %u per "
                        "window", q, (unsigned)permits);
    }
    static const char pen[] = ",penalty=";
    if (p.algorithm != SRL_CONCURRENCY && strncmp(s, pen, sizeof pen - 1) == 0) {
        s += sizeof pen - 1;
        wrc = parse_window(&pe, &s, "penalty", &p.penalty_ns);
        if (wrc == 0 && s[0] == '.' && s[1] == '.')
            wrc = parse_penalty_max(&pe, &s, &p);
        if (wrc != 0)
            return wrc;
    }
    if (*s == ',')
        return fail_option(&pe, s, p.algorithm);
    if (*s != '\0') {
        size_t tlen = strlen(s);
        srl__quote(q, sizeof q, s, tlen);
        return fail(&pe, s, tlen, "trailing text '%s' after the policy", q);
    }

    if (srl_policy_validate(&p) != 0)   /* every limit is checked above; kept as a guard */
        return fail(&pe, text, strlen(text), "invalid policy");
    *out = p;
    return 0;
}

int srl_policy_parse(const char *text, srl_policy *out)
{
    return srl_policy_parse_ex(text, out, NULL);
}

int srl_policy_format(const srl_policy *p, char *buf, size_t len)
{
    if (p == NULL || buf == NULL)
        return SRL_EINVAL;
    int rc = srl_policy_validate(p);
    if (rc != 0)
        return rc;
    char tmp[SRL_POLICY_TEXT_MAX];
    int n;
    if (p->algorithm == SRL_CONCURRENCY && p->window_ns == 0) {
        n = snprintf(tmp, sizeof tmp, "concurrency:%u", (unsigned)p->permits);
        goto out;
    }
    unsigned u = 0;
    while (p->window_ns % units[u].ns != 0)
        u++;   /* terminates: the last unit is 1 ns */
    n = snprintf(tmp, sizeof tmp,
                 p->algorithm == SRL_CONCURRENCY ? "%s:%u,max_hold=%llu%s" : "%s:%u/%llu%s",
                 srl_algorithm_name(p->algorithm), (unsigned)p->permits,
                 (unsigned long long)(p->window_ns / units[u].ns), units[u].name);
    if (n > 0 && p->burst != 0 && p->burst != p->permits && (size_t)n < sizeof tmp)
        n += snprintf(tmp + n, sizeof tmp - (size_t)n, ",burst=%u", (unsigned)p->burst);
    if (n > 0 && p->penalty_ns != 0 && (size_t)n < sizeof tmp) {
        unsigned v = 0;
        while (p->penalty_ns % units[v].ns != 0)
            v++;
        n += snprintf(tmp + n, sizeof tmp - (size_t)n, ",penalty=%llu%s",
                      (unsigned long long)(p->penalty_ns / units[v].ns), units[v].name);
        uint64_t max = (uint64_t)p->penalty_max_s * SRL_NS_PER_S;
        for (v = 0; max != 0 && max % units[v].ns != 0;)
            v++;
        if (max != 0 && n > 0 && (size_t)n < sizeof tmp)
            n += snprintf(tmp + n, sizeof tmp - (size_t)n, "..%llu%s",
                          (unsigned long long)(max / units[v].ns), units[v].name);
    }
out:
    if (n < 0 || (size_t)n >= sizeof tmp)
        return SRL_EPOLICY;   /* cannot happen for a valid policy: 49 chars at most */
    if ((size_t)n >= len)
        return SRL_ENOBUFS;
    memcpy(buf, tmp, (size_t)n + 1);
    return n;
}
