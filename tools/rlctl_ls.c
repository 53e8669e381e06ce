/*
 * rlctl_ls.c - ls: the srl segments of this host.
 *
 * POSIX shared memory objects are the regular files of /dev/shm (ipcs does
 * not see them).  ls opens each one whose name srl accepts, read-only in
 * intent: srl_open_shared with SRL_ADOPT, never SRL_CREATE, which adopts
 * the segment's own policy and never writes a header; its config carries
 * only the trust (--owner, --mode).  What the open
 * says decides the row:
 *   ok                      an srl segment: policy, capacity, size, owner;
 *                           or instead of ok what needs attention
 *                           (rlctl_health.c)
 *   stale/corrupt/version   srl segments that need the operator: always shown
 *   busy                    its creator did not finish in time (ETIMEDOUT)
 *   foreign/forbidden       other programs' objects, or other users' we may
 *                           not open: counted in a "N skipped" note, shown
 *                           with --all.  A forbidden segment that is ours
 *                           (owned by our euid: its mode is refused) is
 *                           always shown: only its owner can fix it.
 *   (vanished)              removed between readdir and open: skipped
 *
 * Cheap by default: the open reads the header and the file's size, nothing
 * more, so ls costs the same at 16 slots and at 50M.  Keys in use, load
 * and the warnings that come from counters (load, untracked, repaired,
 * timeouts) need srl_stats_get, a walk of every bucket (~2 s at 10M
 * slots): only with --keys.  Without it STATUS can only say what the
 * header and the file say (ok, truncated, stale, ...), so on a terminal a
 * last line says that the keys were not counted and how to count them; in
 * JSON "counted" is false and used/load_factor are null, never a guessed 0.
 * The "N skipped" note names the owners of other users' refused segments
 * and the command that shows them (--owner).
 * Rows are sorted by name.
 */
#include "rlctl.h"
#include "metrics_fmt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


const char *rlctl_status_of(int rc)
{
    switch (rc) {
    case 0: return "ok";
    case SRL_ESTALE: return "stale";
    case SRL_ECORRUPT: return "corrupt";
    case SRL_EVERSION: return "version";
    case SRL_ETIMEDOUT: return "busy";
    case SRL_EFOREIGN: return "foreign";
    case SRL_EACCES: return "forbidden";
    case SRL_ENOENT: return "missing";
    default: return "error";
    }
}

void rlctl_probe(const rlctl_opts *o, const char *name, int walk, struct rlctl_seg *g)
{
    *g = (struct rlctl_seg){0};
    snprintf(g->name, sizeof g->name, "%s%s", name[0] == '/' ? "" : "/", name);
    srl_limiter *lim;
    srl_config cfg;
    rlctl_open_config(&cfg);
    int rc = srl_open_shared(g->name, &cfg, SRL_ADOPT, &lim);
    if (rc == 0) {
        rc = srl_info_get(lim, &g->info);
        if (rc == 0 && walk) {
            rlctl_progress p;
            rlctl_progress_begin(&p, o, NULL, NULL, 0, "rlctl: %s: counting %s: %" PRIu64 " %s",
                                 o->cmd->name, g->name, g->info.buckets,
                                 rlctl_plural(g->info.buckets, "bucket", "buckets"));
            rc = srl_stats_get(lim, &g->stats);
            g->counted = rc == 0;
            if (rc == 0 && rlctl_has_units(&g->info)) {   /* metrics' srl_inflight_units */
                rc = rlctl_inflight(lim, &g->inflight);
                g->inflight_counted = rc == 0;
            }
            srl__metrics_seg m = {0};
            if (rc == 0 && walk == 2 && (rc = srl__metrics_count_bans(lim, &m)) == 0) {
                g->bans_counted = 1;   /* metrics' srl_bans_active */
                g->bans_hand = m.bans_hand;
                g->bans_penalty = m.bans_penalty;
            }
            rlctl_progress_end(&p);
        }
        srl_close(lim);
    }
    g->open_rc = rc;
    g->status = rlctl_status_of(rc);
    uint64_t size, total;
    if (rc == SRL_ECORRUPT && rlctl_truncated(g->name, &size, &total))
        g->status = "truncated";
}

/* One more skipped object of uid (another user's, refused): counted per
 * owner for the note, the first RLCTL_LS_OWNERS owners by name. */
static void count_owner(struct rlctl_segs *s, uint32_t uid)
{
    for (size_t i = 0; i < s->nowners; i++)
        if (s->owner_uid[i] == uid) {
            s->owner_count[i]++;
            return;
        }
    if (s->nowners < RLCTL_LS_OWNERS) {
        s->owner_uid[s->nowners] = uid;
        s->owner_count[s->nowners++] = 1;
    }
}

/* Probe one name (owned by uid); returns 0, or -1 on ENOMEM.  Adds a row
 * if it is shown. */
static int probe(const rlctl_opts *o, struct rlctl_segs *s, const char *file, int walk,
                 uint32_t uid)
{
    int ours = uid == geteuid();
    struct rlctl_seg g;
    rlctl_probe(o, file, walk, &g);
    int rc = g.open_rc;
    if (rc == SRL_ENOENT)
        return 0;
    /* Refused although it is ours (its mode lets others write it): the
     * operator must fix it, so it is always shown. */
    if (!o->all && (rc == SRL_EFOREIGN || (rc == SRL_EACCES && !ours))) {
        s->skipped++;
        if (rc == SRL_EACCES)
            count_owner(s, uid);
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct rlctl_seg *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = g;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct rlctl_seg *)a)->name, ((const struct rlctl_seg *)b)->name);
}

/* A readable segment's status is its warnings ("ok" when none): those of
 * the counters only when they were read. */
static const char *shown_status(const struct rlctl_seg *g, char *buf, size_t len)
{
    if (g->open_rc != 0)
        return g->status;
    return rlctl_warnings_text(rlctl_warnings(&g->info, g->counted ? &g->stats : NULL), buf,
                               len);
}

static void print_json(const struct rlctl_segs *s, int walk)
{
    rlctl_json j;
    rlctl_json_init(&j, stdout);
    rlctl_json_begin_obj(&j, NULL);
    rlctl_json_str(&j, "dir", RLCTL_SHM_DIR);
    rlctl_json_bool(&j, "counted", walk);
    rlctl_json_begin_arr(&j, "segments");
    for (size_t i = 0; i < s->n; i++) {
        const struct rlctl_seg *g = &s->v[i];
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", g->name);
        char health[48];
        rlctl_json_str(&j, "status", shown_status(g, health, sizeof health));
        if (g->open_rc == 0) {
            char pol[SRL_LIMITS_TEXT_MAX], owner[64];
            if (srl_limits_format(&g->info.limits, pol, sizeof pol) < 0)
                snprintf(pol, sizeof pol, "?");
            rlctl_json_str(&j, "policy", pol);
            rlctl_json_u64(&j, "capacity", g->info.capacity);
            if (g->counted) {
                rlctl_json_u64(&j, "used", g->stats.used);
                rlctl_json_ratio(&j, "load_factor", g->stats.used, g->info.capacity);
            } else {
                rlctl_json_null(&j, "used");
                rlctl_json_null(&j, "load_factor");
            }
            rlctl_json_u64(&j, "segment_bytes", g->info.segment_bytes);
            rlctl_json_u64(&j, "owner_uid", g->info.owner_uid);
            rlctl_owner_name(g->info.owner_uid, owner, sizeof owner);
            rlctl_json_str(&j, "owner", owner);
        } else {
            rlctl_json_str(&j, "error", srl_strerror(g->open_rc));
        }
        rlctl_json_end_obj(&j);
    }
    rlctl_json_end_arr(&j);
    rlctl_json_u64(&j, "skipped", s->skipped);
    rlctl_json_end_obj(&j);
    rlctl_json_end(&j);
}

/* What was left out, and how to see it: another user's segments by that
 * user (root refuses to map another uid's segment: it drops to the owner
 * with --owner; anyone else needs root for that), the rest with --all. */
static void skipped_note(const struct rlctl_segs *s)
{
    if (s->skipped == 0)
        return;
    size_t others = 0;
    for (size_t i = 0; i < s->nowners; i++)
        others += s->owner_count[i];
    printf("(%zu skipped", s->skipped);
    for (size_t i = 0; i < s->nowners; i++) {
        char who[64];
        rlctl_owner_name(s->owner_uid[i], who, sizeof who);
        if (s->owner_uid[i] == 0)   /* root's: only root opens them */
            printf("%s %zu of user %s: 'sudo rlctl ls' shows them", i ? ";" : ":",
                   s->owner_count[i], who);
        else
            printf("%s %zu of user %s: '%srlctl --owner %s ls' shows them", i ? ";" : ":",
                   s->owner_count[i], who, geteuid() == 0 ? "" : "sudo ", who);
    }
    if (s->skipped > others)
        printf("%s %zu%s not srl segments or not readable", s->nowners ? ";" : ":",
               s->skipped - others, others ? " more" : "");
    printf("; 'rlctl ls --all' lists them all)\n");
}

static int print_text(const struct rlctl_segs *s, int walk)
{
    static const char *const hdr_keys[] = {"NAME", "STATUS", "POLICY", "CAPACITY", "USED",
                                           "LOAD", "SIZE", "OWNER"};
    static const unsigned char right_keys[] = {0, 0, 0, 1, 1, 1, 1, 0};
    static const char *const hdr[] = {"NAME", "STATUS", "POLICY", "CAPACITY", "SIZE", "OWNER"};
    static const unsigned char right[] = {0, 0, 0, 1, 1, 0};
    rlctl_table t;
    rlctl_table_init(&t, walk ? 8 : 6, walk ? hdr_keys : hdr, walk ? right_keys : right);
    size_t readable = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct rlctl_seg *g = &s->v[i];
        char pol[SRL_LIMITS_TEXT_MAX] = "-", cap[24] = "-", used[24] = "-", load[24] = "-",
             size[48] = "-", owner[64] = "-";
        if (g->open_rc == 0) {
            readable++;
            if (srl_limits_format(&g->info.limits, pol, sizeof pol) < 0)
                snprintf(pol, sizeof pol, "?");
            snprintf(cap, sizeof cap, "%" PRIu64, g->info.capacity);
            if (g->counted) {
                snprintf(used, sizeof used, "%" PRIu64, g->stats.used);
                rlctl_fmt_percent(g->stats.used, g->info.capacity, load, sizeof load);
            }
            rlctl_fmt_bytes(g->info.segment_bytes, size, sizeof size);
            rlctl_owner_name(g->info.owner_uid, owner, sizeof owner);
        }
        char health[48];
        const char *st = shown_status(g, health, sizeof health);
        const char *row_keys[] = {g->name, st, pol, cap, used, load, size, owner};
        const char *row[] = {g->name, st, pol, cap, size, owner};
        rlctl_table_add(&t, walk ? row_keys : row);
    }
    int rc = rlctl_table_print(&t, stdout);
    rlctl_table_free(&t);
    /* For a person at a terminal only: a script knows what it asked for
     * (and --json says "counted"). */
    if (rc == 0 && !walk && readable > 0 && isatty(STDOUT_FILENO))
        printf("(keys not counted: 'rlctl ls --keys' adds USED, LOAD and their warnings)\n");
    skipped_note(s);
    return rc;
}

int rlctl_scan(const rlctl_opts *o, int walk, struct rlctl_segs *out)
{
    DIR *d = opendir(RLCTL_SHM_DIR);
    if (d == NULL) {
        fprintf(stderr, "rlctl: %s: %s: is POSIX shared memory mounted there?\n", RLCTL_SHM_DIR,
                strerror(errno));
        return errno == ENOENT ? EX_NOINPUT : errno == EACCES ? EX_NOPERM : EX_OSERR;
    }
    struct rlctl_segs s = {0};
    int status = EX_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* Only a name srl accepts can be an srl segment (this also skips
         * "." and ".."). */
        if (!rlctl_name_valid(e->d_name))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (probe(o, &s, e->d_name, walk, st.st_uid) != 0) {
            fputs("rlctl: out of memory\n", stderr);
            status = EX_OSERR;
            break;
        }
    }
    closedir(d);
    if (status == EX_OK && s.n > 1) /* qsort(NULL, 0, ...) is undefined */
        qsort(s.v, s.n, sizeof *s.v, by_name);
    if (status != EX_OK) {
        free(s.v);
        s = (struct rlctl_segs){0};
    }
    *out = s;
    return status;
}

int rlctl_cmd_ls(const rlctl_opts *o)
{
    struct rlctl_segs s;
    int status = rlctl_scan(o, o->keys, &s);
    if (status == EX_OK) {
        if (o->json)
            print_json(&s, o->keys);
        else
            status = print_text(&s, o->keys);
    }
    free(s.v);
    return rlctl_flush(status);
}
