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
 *     EX_CANTCREAT 73 create failed: exists, no space in /dev/shm
 *     EX_TEMPFAIL 75  a lock or the segment's creator did not answer in time
 *     EX_NOPERM   77  permission denied (owner or mode refused)
 *     EX_SOFTWARE 70  anything else (a bug in rlctl or srl)
 * The status and remedy of each code are in rlctl_errors.c.
 *
 * Segments are opened without SRL_CREATE and with cfg NULL, so rlctl adopts
 * each segment's own policy and geometry and can never create one by
 * accident (only `create` creates).
 */
#include "rlctl.h"

#include <errno.h>
#include <string.h>

int rlctl_fail(const char *name, int rc)
{
    int saved_errno = errno;
    const char *what = rc == SRL_ENOENT ? "no such segment" : srl_strerror(rc);
    fprintf(stderr, "rlctl: %s: %s", name != NULL ? name : "-", what);
    if (rc == SRL_ESYS)
        fprintf(stderr, ": %s", strerror(saved_errno));
    const rlctl_err *e = rlctl_err_lookup(rc);
    if (e != NULL && e->remedy != NULL)
        fprintf(stderr, ": %s", e->remedy);
    fputc('\n', stderr);
    return rlctl_exit_code(rc);
}

/* srl's rule: "/" optional, then 1..200 of [A-Za-z0-9._-]; "." and ".."
 * (all dots) are refused as well, since they name directories. */
int rlctl_name_valid(const char *name)
{
    const char *p = name[0] == '/' ? name + 1 : name;
    size_t n = strlen(p);
    if (n == 0 || n > 200 || strspn(p, ".") == n)
        return 0;
    for (; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int rlctl_open(const rlctl_opts *o, srl_limiter **out)
{
    int rc = srl_open_shared(o->name, NULL, 0, out);
    return rc == 0 ? 0 : rlctl_fail(o->name, rc);
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
    return memchr(in->name, '\0', sizeof in->name) != NULL && rlctl_name_valid(in->name)
               ? in->name
               : typed;
}
