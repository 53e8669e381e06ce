/*
 * rlctl_errors.c - for each srl result code, rlctl's exit status and the
 * remedy it prints (rlctl_open.c prints them; see the status table there).
 *
 * The table is generated from SRL_ERRNO_MAP (srl.h): each code NAME needs
 * an RLCTL_ERR_NAME below giving {exit status, remedy or NULL}, so a code
 * added to srl.h without a decision here does not compile, and
 * tests/rlctl/check_rlctl_errors.c checks every code has its entry.
 * Depends on srl.h and sysexits.h only, so that test can link it alone.
 */
#include "rlctl.h"

#define RLCTL_ERR_OK EX_OK, NULL
#define RLCTL_ERR_EINVAL EX_USAGE, NULL
#define RLCTL_ERR_EPOLICY EX_USAGE, NULL
#define RLCTL_ERR_ECOST EX_USAGE, "give a --cost between 1 and the policy's permits"
#define RLCTL_ERR_EKEY EX_USAGE, NULL
#define RLCTL_ERR_ENOMEM EX_OSERR, "free some memory and retry"
#define RLCTL_ERR_ENOBUFS EX_SOFTWARE, NULL
#define RLCTL_ERR_ENOENT \
    EX_NOINPUT, "check the name; 'rlctl ls' lists the segments on this host"
#define RLCTL_ERR_EEXIST \
    EX_CANTCREAT, "use it as it is, or remove it first with 'rlctl destroy'"
#define RLCTL_ERR_EMISMATCH \
    EX_DATAERR, "open it with its own policy and capacity (rlctl info)"
#define RLCTL_ERR_EFOREIGN EX_DATAERR, "it belongs to another program: leave it alone"
#define RLCTL_ERR_EVERSION \
    EX_DATAERR, "use the rlctl of the srl version that created it, or destroy and recreate it"
#define RLCTL_ERR_ECORRUPT \
    EX_DATAERR, "destroy it ('rlctl destroy') and let the workers recreate it"
#define RLCTL_ERR_ESTALE EX_DATAERR, "no worker can use it until it is removed"
#define RLCTL_ERR_EACCES \
    EX_NOPERM,                                                                             \
        "run rlctl as the segment's owner, and make sure its mode lets nobody else write it"
#define RLCTL_ERR_ENOSPC \
    EX_CANTCREAT, "lower --capacity, or free memory or space in /dev/shm (df /dev/shm, rlctl ls)"
#define RLCTL_ERR_ETIMEDOUT \
    EX_TEMPFAIL,                                                                           \
        "a process may be stopped while holding a lock: retry, and look for stopped workers"
#define RLCTL_ERR_ENOTRECOVERABLE \
    EX_DATAERR, "destroy the segment and let the workers recreate it"
#define RLCTL_ERR_ENOTSUP EX_SOFTWARE, "this limiter does not support the operation"
#define RLCTL_ERR_ESYS EX_OSERR, NULL
#define RLCTL_ERR_ETOOBIG \
    EX_CANTCREAT, "check --capacity (400M is 400 million keys), or add --force if that size is meant"

static const rlctl_err errs[] = {
#define RLCTL_ERR_ENTRY(name, code, msg) [-(code)] = {RLCTL_ERR_##name, 1},
    SRL_ERRNO_MAP(RLCTL_ERR_ENTRY)
#undef RLCTL_ERR_ENTRY
};

const rlctl_err *rlctl_err_lookup(int rc)
{
    if (rc > 0 || rc < -(int)(sizeof errs / sizeof errs[0]) + 1)
        return NULL;
    const rlctl_err *e = &errs[-rc];
    return e->known ? e : NULL;
}

int rlctl_exit_code(int rc)
{
    const rlctl_err *e = rlctl_err_lookup(rc);
    return e != NULL ? e->status : EX_SOFTWARE;
}
