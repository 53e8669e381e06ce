/*
 * rlctl_list.c - list: the keys a segment tracks, with their counters and
 * what a request of cost 1 would get now.
 *
 * srl_foreach visits the table one bucket lock at a time while workers keep
 * running, so the listing is not one snapshot: a key may come or go during
 * the walk.  An entry is valid only inside the callback, which copies what
 * it needs (the display bytes included) and never calls srl.
 *
 * --top N without --sort stops the walk after N keys.  With --sort the walk
 * is complete; rows are kept in an array that is sorted and cut back to N
 * whenever it reaches 2N, so memory stays O(N) on a huge table.
 *
 * AVAILABLE is how many requests of cost 1 the key would admit now (the
 * peek's remaining counts those left after the peeked request, plus that
 * one).  RETRY_AFTER and RESET_AFTER_NEXT are the peek's: what a request
 * of cost 1 now would be told; AT_REST and IDLE describe the key as it
 * stands.
 *
 * Keys are shown escaped (rlctl_escape.c); a display copy shorter than the
 * key ends in "..." and LEN shows the real length; with no display copy
 * (key_display 0) the fingerprint is shown instead, and LEN is "-" (such a
 * segment does not store key lengths; JSON reports key_len 0).
 *
 * A Redis store (NAME a uri) is walked by srl_foreach with SCAN, a batch
 * of keys at a time (see srl_open_redis); --top N stops the walk after N
 * keys, so `list URI --top N` costs a few round trips however many keys
 * the fleet has.  The store cannot count its keys beforehand, so without
 * --top or --all-keys the walk itself is bounded: it stops at
 * RLCTL_LIST_MAX_KEYS + 1 keys and the listing is refused, as for a big
 * segment.  It keeps the whole key (shown as is) but no per-key counts or
 * time of last use: the table drops ALLOWED, DENIED, IDLE and AT_REST (a
 * key at rest is deleted), --sort is refused, and the JSON keeps its
 * fields with allowed/denied 0 and idle_ns null.
 */
#include "rlctl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct row {
    unsigned char *display;
    uint32_t display_len, key_len;
    uint8_t fp[16];
    uint64_t allowed, denied, last_ns;
    srl_decision now;
    int at_rest;
    uint32_t inflight;   /* units held now (a concurrency limit) */
    uint32_t tier;       /* the key's tier (srl_entry.tier) */
    uint32_t control;    /* SRL_KEY_* (srl_entry.control): ban kind, own limits */
    uint64_t ban_left_ns;
};

struct walk {
    struct row *v;
    size_t n, cap;
    enum rlctl_sort sort;
    uint64_t top;
    int oom;
    unsigned only;       /* --exempt / --banned: SRL_KEY_* a row needs one of; 0 all */
    rlctl_progress *progress;
};

static int cmp_rows(const struct row *a, const struct row *b, enum rlctl_sort s)
{
#define DESC(f)            \
    if (a->f != b->f)      \
        return a->f > b->f ? -1 : 1
    switch (s) {
    case RLCTL_SORT_DENIED: DESC(denied); DESC(allowed); break;
    case RLCTL_SORT_ALLOWED: DESC(allowed); DESC(denied); break;
    case RLCTL_SORT_RECENT: DESC(last_ns); break;
    case RLCTL_SORT_NONE: break;
    }
#undef DESC
    /* Ties in a stable, meaningless order: the fingerprint. */
    return memcmp(a->fp, b->fp, sizeof a->fp);
}

/* qsort has no context argument: one comparator per order. */
static int cmp_denied(const void *a, const void *b) { return cmp_rows(a, b, RLCTL_SORT_DENIED); }
static int cmp_allowed(const void *a, const void *b) { return cmp_rows(a, b, RLCTL_SORT_ALLOWED); }
static int cmp_recent(const void *a, const void *b) { return cmp_rows(a, b, RLCTL_SORT_RECENT); }

static void sort_rows(struct walk *w)
{
    int (*cmp)(const void *, const void *) =
        w->sort == RLCTL_SORT_DENIED ? cmp_denied
        : w->sort == RLCTL_SORT_ALLOWED ? cmp_allowed : cmp_recent;
    if (w->sort != RLCTL_SORT_NONE)
        qsort(w->v, w->n, sizeof *w->v, cmp);
}

static void cut_to_top(struct walk *w)
{
    if (w->top == 0 || w->n <= w->top)
        return;
    for (size_t i = w->top; i < w->n; i++)
        free(w->v[i].display);
    w->n = w->top;
}

static int visit(const srl_entry *e, void *ctx)
{
    struct walk *w = ctx;
    rlctl_progress_add(w->progress, 1);
    if (w->only != 0 && !(e->control & w->only))
        return 0;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        struct row *v = realloc(w->v, cap * sizeof *v);
        if (v == NULL) {
            w->oom = 1;
            return 1;
        }
        w->v = v;
        w->cap = cap;
    }
    struct row *r = &w->v[w->n];
    *r = (struct row){.display_len = e->display_len, .key_len = e->key_len,
                      .allowed = e->allowed, .denied = e->denied, .last_ns = e->last_ns,
                      .now = e->now, .at_rest = e->at_rest, .inflight = e->inflight,
                      .tier = e->tier, .control = e->control,
                      .ban_left_ns = e->ban_left_ns};
    memcpy(r->fp, e->fingerprint, sizeof r->fp);
    if (e->display_len > 0) {
        r->display = malloc(e->display_len);
        if (r->display == NULL) {
            w->oom = 1;
            return 1;
        }
        memcpy(r->display, e->display, e->display_len);
    }
    w->n++;
    if (w->top != 0 && w->sort == RLCTL_SORT_NONE)
        return w->n >= w->top; /* enough: stop the walk */
    if (w->top != 0 && w->n >= 2 * w->top) {
        sort_rows(w);
        cut_to_top(w);
    }
    return 0;
}

/* Requests of cost 1 the key would admit now.  e->now is the peek of one
 * such request, whose remaining counts what is left AFTER it: so one more
 * if it would pass, none if not. */
static uint64_t available(const struct row *r)
{
    return r->now.allowed ? (uint64_t)r->now.remaining + 1 : 0;
}

/* The row as an srl_entry, for rlctl_key_label. */
static char *label(const struct row *r)
{
    srl_entry e = {.display = r->display, .display_len = r->display_len, .key_len = r->key_len};
    memcpy(e.fingerprint, r->fp, sizeof e.fingerprint);
    return rlctl_key_label(&e);
}

static int print_json(const char *name, const srl_info *in, const struct walk *w,
                      int64_t visited, uint64_t now, const struct rlctl_tiers *tiers)
{
    rlctl_json j;
    rlctl_json_init(&j, stdout);
    rlctl_json_begin_obj(&j, NULL);
    rlctl_json_str(&j, "name", name);
    /* 0: keys are by fingerprint only ("key" is ""); said here once so a
     * script need not guess why. */
    rlctl_json_u64(&j, "key_display", in->key_display);
    rlctl_json_i64(&j, "visited", visited);
    rlctl_json_u64(&j, "shown", w->n);
    rlctl_json_begin_arr(&j, "keys");
    for (size_t i = 0; i < w->n; i++) {
        const struct row *r = &w->v[i];
        char *key = rlctl_escape(r->display, r->display_len);
        char *hex = rlctl_hex(r->display, r->display_len);
        char *fp = rlctl_hex(r->fp, sizeof r->fp);
        if (key == NULL || hex == NULL || fp == NULL) {
            free(key), free(hex), free(fp);
            return -1;
        }
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "key", key);
        rlctl_json_str(&j, "key_hex", hex);
        rlctl_json_u64(&j, "key_len", r->key_len);
        rlctl_json_u64(&j, "display_len", r->display_len);
        /* key_len 0 = not stored: no key bytes are shown, so it is cut. */
        rlctl_json_bool(&j, "truncated", r->key_len == 0 || r->display_len < r->key_len);
        rlctl_json_str(&j, "fingerprint", fp);
        rlctl_json_u64(&j, "allowed", r->allowed);
        rlctl_json_u64(&j, "denied", r->denied);
        rlctl_json_u64(&j, "last_ns", r->last_ns);
        if (r->last_ns != 0 && r->last_ns <= now)
            rlctl_json_u64(&j, "idle_ns", now - r->last_ns);
        else
            rlctl_json_null(&j, "idle_ns");
        rlctl_json_u64(&j, "limit", r->now.limit);
        rlctl_json_u64(&j, "available", available(r));
        rlctl_json_u64(&j, "retry_after_ns", r->now.retry_after_ns);
        rlctl_json_u64(&j, "reset_after_ns", r->now.reset_after_ns);
        rlctl_json_bool(&j, "at_rest", r->at_rest);
        rlctl_json_u64(&j, "inflight", r->inflight);
        rlctl_json_u64(&j, "tier", r->tier);
        rlctl_json_str(&j, "tier_name", rlctl_tier_name(tiers, r->tier));
        if (rlctl_ban_kind(r->control) != NULL)
            rlctl_json_str(&j, "ban_kind", rlctl_ban_kind(r->control));
        else
            rlctl_json_null(&j, "ban_kind");
        rlctl_json_bool(&j, "exempt", (r->control & SRL_KEY_EXEMPT) != 0);
        if (r->control & SRL_KEY_BANNED)
            rlctl_json_u64(&j, "ban_left_ns", r->ban_left_ns);
        else
            rlctl_json_null(&j, "ban_left_ns");
        rlctl_json_bool(&j, "own_limits", (r->control & SRL_KEY_OWN_LIMITS) != 0);
        rlctl_json_end_obj(&j);
        free(key), free(hex), free(fp);
    }
    rlctl_json_end_arr(&j);
    rlctl_json_end_obj(&j);
    rlctl_json_end(&j);
    return 0;
}

/* The table.  A Redis store keeps no per-key counts, time of last use or
 * state at rest: its rows have only the columns in redis_cols. */
static int print_text(const rlctl_opts *o, const char *name, const struct walk *w, uint64_t now,
                      int redis, int units, const struct rlctl_tiers *tiers)
{
    /* RESET_AFTER_NEXT, not RESET_AFTER: the value is the peek's, so it is
     * what a request of cost 1 now would be told (until at rest AFTER that
     * request), while AT_REST is the key as it stands.  Under the old
     * name a key at rest read "AT_REST yes" beside "RESET_AFTER 600ms" (one
     * emission interval: a new key's first request), which looked like a
     * contradiction.  srl_entry has no "until at rest as it stands" (see
     * docs/design.md), so the column says which moment it shows. */
    const char *const hdr[] = {"KEY", "LEN", "ALLOWED", "DENIED", "AVAILABLE",
                               "RETRY_AFTER", "RESET_AFTER_NEXT", "IDLE", "AT_REST",
                               units ? "INFLIGHT" : "TIER"};
    static const unsigned char right[] = {0, 1, 1, 1, 1, 1, 1, 1, 0, 1};
    static const size_t redis_cols[] = {0, 1, 4, 5, 6};
    /* INFLIGHT only for a policy with a concurrency limit (never on Redis);
     * TIER only for a segment with tiers (which never has one). */
    int tiered = !redis && !units && tiers->n > 1;
    size_t ncols = redis ? sizeof redis_cols / sizeof redis_cols[0] : units || tiered ? 10 : 9;
    const char *h[11];
    unsigned char rt[11];
    for (size_t c = 0; c < ncols; c++) {
        h[c] = hdr[redis ? redis_cols[c] : c];
        rt[c] = right[redis ? redis_cols[c] : c];
    }
    /* BAN (hand or penalty) last, only when a row shown has a ban. */
    size_t bancol = 0;
    for (size_t i = 0; !redis && bancol == 0 && i < w->n; i++)
        if (rlctl_ban_kind(w->v[i].control) != NULL) {
            bancol = ncols++;
            h[bancol] = "BAN";
            rt[bancol] = 0;
        }
    rlctl_table t;
    rlctl_table_init(&t, ncols, h, rt);
    /* Building and printing millions of rows takes longer than the walk
     * (3M: 2 s walk, 6 s rows).  Shown only when stdout is not the
     * terminal: there the rows themselves are the progress, and a line
     * drawn between them would be torn. */
    rlctl_progress p;
    rlctl_opts quiet = *o;
    quiet.json = quiet.json || isatty(STDOUT_FILENO);
    rlctl_progress_begin(&p, &quiet, "row", "rows", w->n, "rlctl: list: %s: writing", name);
    for (size_t i = 0; i < w->n; i++) {
        const struct row *r = &w->v[i];
        char *key = label(r);
        rlctl_progress_add(&p, 1);
        if (key == NULL) {
            rlctl_progress_end(&p);
            rlctl_table_free(&t);
            return -1;
        }
        char len[16], al[24], de[24], rem[40], ra[48], rs[48], idle[48], inf[16];
        /* key_len 0: not stored (a segment without display copies). */
        if (r->key_len == 0)
            snprintf(len, sizeof len, "-");
        else
            snprintf(len, sizeof len, "%u", r->key_len);
        snprintf(al, sizeof al, "%" PRIu64, r->allowed);
        snprintf(de, sizeof de, "%" PRIu64, r->denied);
        snprintf(rem, sizeof rem, "%" PRIu64 "/%u", available(r), r->now.limit);
        rlctl_fmt_duration(r->now.retry_after_ns, ra, sizeof ra);
        rlctl_fmt_duration(r->now.reset_after_ns, rs, sizeof rs);
        if (r->last_ns != 0 && r->last_ns <= now)
            rlctl_fmt_duration(now - r->last_ns, idle, sizeof idle);
        else
            snprintf(idle, sizeof idle, "-");
        snprintf(inf, sizeof inf, "%u", r->inflight);
        const char *row[] = {key, len, al, de, rem, ra, rs, idle, r->at_rest ? "yes" : "no",
                             units                               ? inf
                             : (r->control & SRL_KEY_OWN_LIMITS) ? "(own limits)"
                                                                 : rlctl_tier_name(tiers, r->tier)};
        const char *out[11];
        for (size_t c = 0; c < ncols; c++)
            out[c] = c == bancol && bancol != 0 ? NULL : row[redis ? redis_cols[c] : c];
        if (bancol != 0) {
            const char *kind = rlctl_ban_kind(r->control);
            out[bancol] = kind != NULL ? kind : "-";
        }
        rlctl_table_add(&t, out);
        free(key);
    }
    int rc = rlctl_table_print(&t, stdout);
    fflush(stdout); /* the rows are written before the line is erased */
    rlctl_progress_end(&p);
    rlctl_table_free(&t);
    return rc;
}

/* More keys than RLCTL_LIST_MAX_KEYS and neither --top nor --all-keys:
 * refuse, naming the count and the ways on (EX_USAGE: the command line is
 * what must change).  With --json the refusal is an object on stdout too. */
static int refuse_long(const rlctl_opts *o, const char *name, uint64_t used)
{
    fprintf(stderr,
            "rlctl: list: %s tracks %" PRIu64 " keys, more than %u: give --top N (with "
            "--sort denied, allowed or recent) for the N that matter, or --all-keys to list "
            "every one\n",
            name, used, RLCTL_LIST_MAX_KEYS);
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", name);
        rlctl_json_str(&j, "error", "too many keys to list without --top or --all-keys");
        rlctl_json_u64(&j, "used", used);
        rlctl_json_u64(&j, "max_keys", RLCTL_LIST_MAX_KEYS);
        rlctl_json_str(&j, "remedy", "give --top N (with --sort), or --all-keys");
        rlctl_json_u64(&j, "exit_status", EX_USAGE);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    }
    return rlctl_flush(EX_USAGE);
}

/* srl_stats_get with a progress line (it walks every bucket). */
static int count_keys(const rlctl_opts *o, srl_limiter *lim, const srl_info *in, srl_stats *st)
{
    rlctl_progress p;
    rlctl_progress_begin(&p, o, NULL, NULL, 0, "rlctl: list: counting %s: %" PRIu64 " %s",
                         rlctl_seg_name(in, o->name), in->buckets,
                         rlctl_plural(in->buckets, "bucket", "buckets"));
    int rc = srl_stats_get(lim, st);
    rlctl_progress_end(&p);
    return rc;
}

/* What --key-display 32 would cost this segment per slot: measured on a
 * one-bucket anonymous table of its policy (the slot also grows by the
 * stored key length and alignment, so it is not just 32), 0 if unknown. */
static uint32_t display_cost(const srl_info *in)
{
    srl_config c;
    srl_config_init(&c);
    c.limits = in->limits;
    c.capacity = 1;
    c.key_display = 32;
    srl_limiter *lim;
    srl_info big;
    if (srl_open_anonymous(&c, &lim) != 0)
        return 0;
    int rc = srl_info_get(lim, &big);
    srl_close(lim);
    return rc == 0 && big.slot_bytes > in->slot_bytes ? big.slot_bytes - in->slot_bytes : 0;
}

/* The lines after the table: how many were shown, and what a reader of
 * the table would otherwise misread. */
static void print_notes(const srl_info *in, const struct walk *w, uint64_t total)
{
    if (total > w->n)
        printf("(%zu of %" PRIu64 " keys shown)\n", w->n, total);
    if (w->n == 0)
        return;
    if (in->key_display == 0) {
        uint32_t per = display_cost(in);
        char b[48];
        if (per != 0)
            printf("(keys shown by fingerprint: this segment keeps no key bytes; to see them, "
                   "recreate it with --key-display 32 and open it with key_display 32 in the "
                   "workers: %u more bytes per slot, %s for its %" PRIu64 " slots)\n",
                   per, rlctl_fmt_bytes((uint64_t)per * in->capacity, b, sizeof b),
                   in->capacity);
        else
            printf("(keys shown by fingerprint: this segment keeps no key bytes; to see them, "
                   "recreate it with --key-display 32 and open it with key_display 32 in the "
                   "workers)\n");
    }
    if (in->policy.algorithm == SRL_GCRA || in->policy.algorithm == SRL_SLIDING_COUNTER)
        printf("(IDLE is '-': %s keeps no time of last use)\n",
               srl_algorithm_name(in->policy.algorithm));
}

int rlctl_cmd_list(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    srl_info info;
    int rc = srl_info_get(lim, &info);
    if (rc != 0) {
        srl_close(lim);
        return rlctl_fail_cmd(o, rc);
    }
    const char *name = rlctl_seg_name(&info, o->name);
    int redis = info.kind == SRL_STORE_REDIS;
    if (redis && o->sort != RLCTL_SORT_NONE) {
        fputs("rlctl: list: --sort: a Redis store keeps no per-key counts or time of last "
              "use; list it without --sort (--top N shows the first N keys found)\n",
              stderr);
        srl_close(lim);
        return EX_USAGE;
    }
    /* gcra and sliding_counter keep no time of last use (their state is a
     * theoretical arrival time or two counts): sorting by it would silently
     * give table order, so say so instead. */
    if (o->sort == RLCTL_SORT_RECENT &&
        (info.policy.algorithm == SRL_GCRA || info.policy.algorithm == SRL_SLIDING_COUNTER)) {
        fprintf(stderr,
                "rlctl: list: --sort recent: %s segments do not record when a key was last "
                "used; sort by denied or allowed\n",
                srl_algorithm_name(info.policy.algorithm));
        srl_close(lim);
        return EX_USAGE;
    }
    /* Without --top the whole table is printed: count the keys first (a
     * walk of the bucket counters, far cheaper than the listing), to
     * refuse a listing of millions and to show progress against the
     * total.  With --top the listing is bounded, and the count is read
     * after it, for the "(N of M keys shown)" footer only. */
    srl_stats st;
    int have = 0;
    if (o->top == 0 && !redis) {
        rc = count_keys(o, lim, &info, &st);
        if (rc != 0) {
            srl_close(lim);
            return rlctl_fail_cmd(o, rc);
        }
        have = 1;
        if (!o->all_keys && st.used > RLCTL_LIST_MAX_KEYS) {
            srl_close(lim);
            return refuse_long(o, name, st.used);
        }
    }
    rlctl_progress p;
    rlctl_progress_begin(&p, o, "key", "keys", have ? st.used : 0, "rlctl: list: %s", name);
    struct walk w = {.sort = o->sort, .top = o->top, .only = o->only, .progress = &p};
    struct rlctl_tiers tiers;
    rc = rlctl_tiers_load(lim, &info, 0, &tiers);
    if (rc != 0) {
        rlctl_progress_end(&p);
        srl_close(lim);
        return rlctl_fail_cmd(o, rc);
    }
    /* A Redis store cannot be counted first: bound the walk itself. */
    int bounded = redis && o->top == 0 && !o->all_keys;
    if (bounded)
        w.top = RLCTL_LIST_MAX_KEYS + 1;
    int64_t visited = srl_foreach(lim, visit, &w);
    rlctl_progress_end(&p);
    if (!have && !redis)
        have = count_keys(o, lim, &info, &st) == 0;
    srl_close(lim);
    if (bounded && visited >= 0 && w.n > RLCTL_LIST_MAX_KEYS) {
        for (size_t i = 0; i < w.n; i++)
            free(w.v[i].display);
        free(w.v);
        fprintf(stderr,
                "rlctl: list: %s holds more than %u keys: give --top N for the first N SCAN "
                "finds, or --all-keys to list every one\n",
                name, RLCTL_LIST_MAX_KEYS);
        return rlctl_flush(EX_USAGE);
    }
    /* Idle times against the default ticker, which shared segments use. */
    uint64_t now = srl_monotonic_ns(NULL);
    if (visited < 0) {
        status = rlctl_fail_cmd(o, (int)visited);
    } else if (w.oom) {
        fputs("rlctl: out of memory\n", stderr);
        status = EX_OSERR;
    } else {
        sort_rows(&w);
        cut_to_top(&w);
        rc = o->json ? print_json(o->name, &info, &w, visited, now, &tiers)
                     : print_text(o, name, &w, now, redis, rlctl_has_units(&info), &tiers);
        if (rc < 0) {
            fputs("rlctl: out of memory\n", stderr);
            status = EX_OSERR;
        } else {
            status = rc;
            /* --top without --sort stops the walk early: the total is
             * then the table's count of keys (srl_stats.used). */
            uint64_t total = (uint64_t)visited;
            if (have && o->top != 0 && o->sort == RLCTL_SORT_NONE && w.n == o->top &&
                st.used > total)
                total = st.used;
            if (!o->json && rc == 0 && redis && o->top != 0 && w.n == o->top)
                printf("(%zu %s shown; --top stopped the walk, there may be more)\n", w.n,
                       rlctl_plural(w.n, "key", "keys"));
            else if (!o->json && rc == 0 && redis)
                printf("(%zu %s)\n", w.n, rlctl_plural(w.n, "key", "keys"));
            else if (!o->json && rc == 0)
                print_notes(&info, &w, total);
        }
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.v[i].display);
    free(w.v);
    return rlctl_flush(status);
}
