/*
 * rlctl_open.c - opening a segment, which names are valid, and what rlctl
 * says when srl fails.
 *
 * Every failure is one line on stderr,
 *     rlctl: NAME: <what is wrong (srl_strerror)>: <what to do about it>
 * and a sysexits.h status chosen by who can fix it:
 *     EX_USAGE    64  bad argument (policy, cost, key)
 *     EX_DATAERR  65  the object is not usable srl data: foreign, another
 *                     layout version, corrupt, stale (its creator died
 *                     before finishing it: permanent until destroyed, so
 *                     not EX_TEMPFAIL, which scripts retry), a lock that
 *                     cannot be recovered, another policy/geometry
 *     EX_NOINPUT  66  no such segment
 *     EX_OSERR    71  out of memory, other system errors
 *     EX_CANTCREAT 73 create failed: exists, no room (/dev/shm or memory),
 *                     above the size guard without --force
 *     EX_TEMPFAIL 75  a lock or the segment's creator did not answer in time
 *     EX_NOPERM   77  permission denied (owner or mode refused)
 *     EX_SOFTWARE 70  anything else (a bug in rlctl or srl)
 * The status and remedy of each code are in rlctl_errors.c.
 *
 * Segments are opened with SRL_ADOPT (never SRL_CREATE), so rlctl adopts
 * each segment's own policy and geometry and can never create one by
 * accident (only `create` creates); its config carries only the trust
 * (--owner, rlctl_owner.c).
 */
#include "rlctl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* srl's one name rule (srl_name_check in srl.h). */
int rlctl_name_valid(const char *name)
{
    return srl_name_check(name) == 0;
}

/* 1 if NAME's file is shorter than its header's total (a truncation), with
 * both sizes.  The header's total is read as plain bytes, for the message
 * only: nothing is mapped. */
int rlctl_truncated(const char *name, uint64_t *size, uint64_t *total)
{
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", name[0] == '/' ? name + 1 : name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    *total = 0;
    /* total_bytes sits at offset 48 of the header (src/shm/shm.h, layouts 4 to
     * 8: magic 8, version 4, state 4, abi 8, buckets, capacity, table_offset);
     * the version word at offset 8 says whether that holds. */
    uint32_t version = 0;
    int got = fstat(fd, &st) == 0 &&
              pread(fd, &version, sizeof version, 8) == (ssize_t)sizeof version &&
              version >= 4 && version <= 8 &&
              pread(fd, total, sizeof *total, 48) == (ssize_t)sizeof *total;
    close(fd);
    *size = got ? (uint64_t)st.st_size : 0;
    return got && *size < *total;
}

static int say_truncated(const char *name)
{
    uint64_t size, total;
    if (!rlctl_truncated(name, &size, &total))
        return 0;
    fprintf(stderr,
            ": its file is %llu bytes but its header says %llu: it was truncated (workers "
            "still using it die of SIGBUS): stop them, 'rlctl destroy %s', and restart them",
            (unsigned long long)size, (unsigned long long)total, name);
    return 1;
}

/* What srl's code means for NAME: a segment, or a Redis store's uri. */
static const char *what_failed(const char *name, int rc)
{
    int uri = name != NULL && rlctl_is_uri(name);
    if (rc == SRL_ENOENT)
        return uri ? "no srl limiter at this uri" : "no such segment";
    if (rc == SRL_EACCES && uri)
        return "the Redis server refused access";   /* srl_strerror speaks of segments */
    return srl_strerror(rc);
}

int rlctl_fail(const char *name, int rc)
{
    int saved_errno = errno;
    fprintf(stderr, "rlctl: %s: %s", name != NULL ? name : "-", what_failed(name, rc));
    char detail[256];
    if (srl_last_error(detail, sizeof detail) > 0)
        fprintf(stderr, ": %s", detail);   /* which server, and what it did */
    else if (rc == SRL_ESYS)
        fprintf(stderr, ": %s", strerror(saved_errno));
    const rlctl_err *e = rlctl_err_lookup(rc);
    const char *redis = name != NULL && rlctl_is_uri(name) ? rlctl_redis_remedy(rc) : NULL;
    if (redis != NULL)
        fprintf(stderr, ": %s", redis);
    else if (rc == SRL_EACCES && name != NULL)
        rlctl_owner_remedy(name);
    else if (!(rc == SRL_ECORRUPT && name != NULL && say_truncated(name)) && e != NULL &&
             e->remedy != NULL)
        fprintf(stderr, ": %s", e->remedy);
    fputc('\n', stderr);
    return rlctl_exit_code(rc);
}

/* With --json a failure is JSON on stdout as well, so a script reading
 * stdout sees an object, not nothing. */
static void fail_json(const rlctl_opts *o, int rc, const char *error, const char *remedy,
                      int status)
{
    rlctl_json j;
    rlctl_json_init(&j, stdout);
    rlctl_json_begin_obj(&j, NULL);
    rlctl_json_str(&j, "name", o->name != NULL ? o->name : "-");
    rlctl_json_str(&j, "error", error);
    rlctl_json_i64(&j, "code", rc);
    if (remedy != NULL)
        rlctl_json_str(&j, "remedy", remedy);
    rlctl_json_u64(&j, "exit_status", (uint64_t)status);
    rlctl_json_end_obj(&j);
    rlctl_json_end(&j);
    fflush(stdout);
}

int rlctl_fail_cmd(const rlctl_opts *o, int rc)
{
    int status = rlctl_fail(o->name, rc);
    if (o->json) {
        const rlctl_err *e = rlctl_err_lookup(rc);
        const char *r = rlctl_is_uri(o->name != NULL ? o->name : "") ? rlctl_redis_remedy(rc)
                                                                       : NULL;
        if (r == NULL)
            r = e != NULL ? e->remedy : NULL;
        fail_json(o, rc, what_failed(o->name, rc), r, status);
    }
    return status;
}

int rlctl_fail_cmd_why(const rlctl_opts *o, int rc, const char *error, const char *remedy)
{
    int status = rlctl_exit_code(rc);
    fprintf(stderr, "rlctl: %s: %s%s%s\n", o->name != NULL ? o->name : "-", error,
            remedy != NULL ? ": " : "", remedy != NULL ? remedy : "");
    if (o->json)
        fail_json(o, rc, error, remedy, status);
    return status;
}

void rlctl_open_config(srl_config *cfg)
{
    srl_config_init(cfg);
    cfg->owner_uid = rlctl_trusted_uid();
    cfg->mode = rlctl_trusted_mode();
}

int rlctl_open(const rlctl_opts *o, srl_limiter **out)
{
    if (o->uri != NULL) {   /* adopt the stored policy; never create (rlctl_redis.c) */
        int rc = srl_open_redis(o->uri, NULL, out);
        return rc == 0 ? 0 : rlctl_fail_cmd(o, rc);
    }
    srl_config cfg;
    rlctl_open_config(&cfg);
    int rc = srl_open_shared(o->name, &cfg, SRL_ADOPT, out);
    return rc == 0 ? 0 : rlctl_fail_cmd(o, rc);
}

int rlctl_flush(int status)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "rlctl: writing the output failed: %s\n", strerror(errno));
        return status == EX_OK || status == RLCTL_EX_NO ? EX_IOERR : status;
    }
    return status;
}

const char *rlctl_seg_name(const srl_info *in, const char *typed)
{
    /* A Redis store's name is its prefix, not a segment: keep the uri
     * (as typed, password hidden). */
    if (in->kind == SRL_STORE_REDIS)
        return typed;
    return memchr(in->name, '\0', sizeof in->name) != NULL && rlctl_name_valid(in->name)
               ? in->name
               : typed;
}
