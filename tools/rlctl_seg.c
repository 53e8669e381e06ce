/*
 * rlctl_seg.c - commands on a whole segment: create, destroy, check.
 *
 * create is the only command that passes SRL_CREATE (with SRL_EXCL: an
 * existing segment is never adopted or reshaped, EX_CANTCREAT instead);
 * --force is SRL_CONFIG_FORCE (a segment above the library's size guard),
 * and a refused size is explained by srl_room_check.
 * destroy opens the name first and removes it only if it is an srl segment
 * (or one that is stale, corrupt or of another version, for which removal
 * is the remedy); a foreign object is left alone unless --force.  check
 * runs srl_check, which takes one bucket lock at a time: workers keep
 * running while it walks.
 */
#include "rlctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>

/* Free bytes of /dev/shm for unprivileged users, or -1. */
static int64_t shm_free(void)
{
    struct statvfs v;
    if (statvfs(RLCTL_SHM_DIR, &v) != 0)
        return -1;
    return (int64_t)((uint64_t)v.f_bavail * v.f_frsize);
}

static const char *on_full_name(srl_on_full f)
{
    return f == SRL_ON_FULL_DENY ? "deny" : "allow";
}

static void print_free(const char *label, int64_t bytes)
{
    char b[48];
    printf("%s%s", label, bytes < 0 ? "unknown" : rlctl_fmt_bytes((uint64_t)bytes, b, sizeof b));
}

int rlctl_cmd_create(const rlctl_opts *o)
{
    srl_config cfg = o->cfg;
    if (o->force)
        cfg.flags |= SRL_CONFIG_FORCE;
    int64_t before = shm_free();
    srl_limiter *lim;
    int rc = srl_open_shared(o->name, &cfg, SRL_CREATE | SRL_EXCL, &lim);
    if (rc != 0) {
        int status = rlctl_fail_cmd(o, rc);
        /* The library's sentence: what the segment needs, what is free. */
        char why[512];
        if ((rc == SRL_ENOSPC || rc == SRL_ETOOBIG) && srl_room_check(&cfg, why, sizeof why) != 0)
            fprintf(stderr, "rlctl: %s: %s\n", o->name, why);
        return status;
    }
    srl_info info;
    struct rlctl_tiers tiers;
    rc = srl_info_get(lim, &info);
    if (rc == 0)
        rc = rlctl_tiers_load(lim, &info, 0, &tiers);
    srl_close(lim);
    if (rc != 0)
        return rlctl_fail_cmd(o, rc);
    int64_t after = shm_free();
    char pol[SRL_LIMITS_TEXT_MAX];
    if (srl_limits_format(&info.limits, pol, sizeof pol) < 0)
        snprintf(pol, sizeof pol, "?");
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", rlctl_seg_name(&info, o->name));
        rlctl_json_bool(&j, "created", 1);
        rlctl_json_str(&j, "policy", pol);
        rlctl_json_u64(&j, "capacity", info.capacity);
        rlctl_json_u64(&j, "buckets", info.buckets);
        rlctl_json_u64(&j, "slots_per_bucket", info.slots_per_bucket);
        rlctl_json_u64(&j, "segment_bytes", info.segment_bytes);
        rlctl_json_u64(&j, "slot_bytes", info.slot_bytes);
        rlctl_json_u64(&j, "key_display", info.key_display);
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", info.mode);
        rlctl_json_u64(&j, "mode", info.mode);
        rlctl_json_str(&j, "mode_octal", mode);
        rlctl_json_str(&j, "on_full", on_full_name(info.on_full));
        rlctl_tiers_json(&j, &tiers);
        if (before < 0)
            rlctl_json_null(&j, "shm_free_before");
        else
            rlctl_json_u64(&j, "shm_free_before", (uint64_t)before);
        if (after < 0)
            rlctl_json_null(&j, "shm_free_after");
        else
            rlctl_json_u64(&j, "shm_free_after", (uint64_t)after);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
        return rlctl_flush(EX_OK);
    }
    char b[48], sb[128];
    printf("created %s: %s, %" PRIu64 " %s (%" PRIu64 " %s of %u), on full %s, mode %04o\n",
           rlctl_seg_name(&info, o->name), pol, info.capacity,
           rlctl_plural(info.capacity, "slot", "slots"), info.buckets,
           rlctl_plural(info.buckets, "bucket", "buckets"), info.slots_per_bucket,
           on_full_name(info.on_full), info.mode);
    rlctl_tiers_text(&tiers);
    printf("segment size: %" PRIu64 " bytes (%s); bytes per slot: %s\n", info.segment_bytes,
           rlctl_fmt_bytes(info.segment_bytes, b, sizeof b),
           rlctl_fmt_slot_bytes(&info, sb, sizeof sb));
    print_free(RLCTL_SHM_DIR " free: before ", before);
    print_free(", after ", after);
    if (before >= 0 && after >= 0 && before >= after)
        printf(" (%s taken)", rlctl_fmt_bytes((uint64_t)(before - after), b, sizeof b));
    putchar('\n');
    /* Group or other write: every opener refuses it unless it says it
     * trusts them (srl.h, design.md "Trust"), rlctl included. */
    if (info.mode & 022)
        printf("mode %04o: openers must accept it: 'rlctl --mode %04o ...', and the workers' "
               "mode option (PHP 'mode' => 0%o); others refuse it as forbidden\n",
               info.mode, info.mode, info.mode);
    return rlctl_flush(EX_OK);
}

int rlctl_cmd_destroy(const rlctl_opts *o)
{
    if (!o->force) {
        srl_limiter *lim;
        srl_config cfg;
        rlctl_open_config(&cfg);
        int rc = srl_open_shared(o->name, &cfg, SRL_ADOPT, &lim);
        if (rc == 0)
            srl_close(lim);
        else if (rc == SRL_EFOREIGN) {
            fprintf(stderr, "rlctl: %s: %s: refusing to remove it (--force removes it anyway)\n",
                    o->name, srl_strerror(rc));
            return EX_DATAERR;
        } else if (rc != SRL_ESTALE && rc != SRL_ECORRUPT && rc != SRL_EVERSION)
            return rlctl_fail_cmd(o, rc);
    }
    int rc = srl_unlink(o->name);
    if (rc == SRL_EFOREIGN && o->force) {
        /* srl refuses a foreign object; --force says remove it regardless. */
        char path[256];
        snprintf(path, sizeof path, "%s%s", o->name[0] == '/' ? "" : "/", o->name);
        rc = shm_unlink(path) == 0 ? 0 : errno == ENOENT ? SRL_ENOENT
                                      : errno == EACCES ? SRL_EACCES : SRL_ESYS;
    }
    if (rc != 0)
        return rlctl_fail_cmd(o, rc);
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", o->name);
        rlctl_json_bool(&j, "destroyed", 1);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else {
        printf("destroyed %s (processes that have it open keep using it until they close it)\n",
               o->name);
    }
    return rlctl_flush(EX_OK);
}

/* check: problems are collected first, so a failed walk never leaves
 * half-written JSON behind. */
struct problems {
    char **v;
    size_t n, cap;
    int oom;
};

static void collect(void *ctx, const char *problem)
{
    struct problems *p = ctx;
    if (p->oom)
        return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        char **v = realloc(p->v, cap * sizeof *v);
        if (v == NULL) {
            p->oom = 1;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    /* The library's text, escaped anyway: it may quote key bytes. */
    char *s = rlctl_escape((const unsigned char *)problem, strlen(problem));
    if (s == NULL) {
        p->oom = 1;
        return;
    }
    p->v[p->n++] = s;
}

int rlctl_cmd_check(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    struct problems p = {0};
    rlctl_progress pr;
    srl_info in;
    uint64_t buckets = srl_info_get(lim, &in) == 0 ? in.buckets : 0;
    rlctl_progress_begin(&pr, o, NULL, NULL, 0, "rlctl: check: %s: %" PRIu64 " %s", o->name,
                         buckets, rlctl_plural(buckets, "bucket", "buckets"));
    int64_t n = srl_check(lim, collect, &p);
    rlctl_progress_end(&pr);
    srl_close(lim);
    if (n < 0) {
        status = rlctl_fail_cmd(o, (int)n);
    } else if (p.oom) {
        fputs("rlctl: out of memory\n", stderr);
        status = EX_OSERR;
    } else if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", o->name);
        rlctl_json_bool(&j, "healthy", n == 0);
        rlctl_json_i64(&j, "problem_count", n);
        rlctl_json_begin_arr(&j, "problems");
        for (size_t i = 0; i < p.n; i++)
            rlctl_json_str(&j, NULL, p.v[i]);
        rlctl_json_end_arr(&j);
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
        status = rlctl_flush(n == 0 ? EX_OK : RLCTL_EX_NO);
    } else {
        for (size_t i = 0; i < p.n; i++)
            printf("%s: %s\n", o->name, p.v[i]);
        if (n == 0)
            printf("%s: healthy: every invariant holds\n", o->name);
        else
            printf("%s: %" PRId64 " problem%s found\n", o->name, n, n == 1 ? "" : "s");
        status = rlctl_flush(n == 0 ? EX_OK : RLCTL_EX_NO);
    }
    for (size_t i = 0; i < p.n; i++)
        free(p.v[i]);
    free(p.v);
    return status;
}
