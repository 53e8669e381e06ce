/*
 * rlctl_owner.c - `rlctl --owner USER`: whose segments this run may map.
 *
 * srl maps only segments owned by the caller's effective uid, or by one uid
 * the caller names (srl.h, docs/design.md "Trust").  Root gets no exemption
 * from the library, because whoever owns a segment can make glibc write
 * through the pointers kept in its mutexes in every process that locks
 * them.  So root inspects a worker's segment by becoming that worker: with
 * --owner, root's rlctl drops to the user's uid and gid (and no
 * supplementary groups) for the whole command, before anything is opened,
 * and checks the drop cannot be undone.  Nothing then runs as root that a
 * segment could hurt.  A non-root caller cannot change uid: for it --owner
 * names the one other uid it trusts (srl_config.owner_uid), which it may
 * map only if that user gave it access (mode and group).
 *
 * `rlctl --mode M`: the group/other write bits this run accepts on a
 * segment (srl_config.mode; default 0600: none).  A segment created 0660
 * to share with a group is refused by every opener that does not say it
 * trusts that group, rlctl included, so the operator says it here, as a
 * PHP worker says it with its 'mode' option.
 *
 * Process-global state, set once from main before any command runs.
 */
#include "rlctl.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t trusted = SRL_OWNER_SELF;
static uint32_t accepted_mode = 0600;

uint32_t rlctl_trusted_mode(void)
{
    return accepted_mode;
}

int rlctl_mode_apply(const char *arg)
{
    char *end;
    errno = 0;
    unsigned long m = strtoul(arg, &end, 8);
    if (arg[0] < '0' || arg[0] > '7' || *end != '\0' || errno != 0 || m > 0777 ||
        strlen(arg) > 4) {
        char *shown = rlctl_escape((const unsigned char *)arg, strlen(arg));
        fprintf(stderr, "rlctl: --mode: invalid value '%s': expected octal permission bits, "
                "e.g. 0660 to accept a segment its group may write\n", shown ? shown : "?");
        free(shown);
        return EX_USAGE;
    }
    accepted_mode = (uint32_t)m;
    return 0;
}

uint32_t rlctl_trusted_uid(void)
{
    return trusted;
}

/* USER is a login name or a numeric uid. */
static int resolve(const char *user, uid_t *uid, gid_t *gid)
{
    struct passwd *pw = getpwnam(user);
    if (pw == NULL) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(user, &end, 10);
        if (*user == '\0' || *end != '\0' || errno != 0 || v >= SRL_OWNER_SELF)
            return -1;
        pw = getpwuid((uid_t)v);
        *uid = (uid_t)v;
        *gid = pw != NULL ? pw->pw_gid : (gid_t)v;
        return 0;
    }
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return 0;
}

int rlctl_owner_apply(const char *user)
{
    uid_t uid;
    gid_t gid;
    if (resolve(user, &uid, &gid) != 0) {
        fprintf(stderr, "rlctl: --owner %s: no such user (give a login name or a uid)\n", user);
        return EX_USAGE;
    }
    if (geteuid() != 0) {
        if (uid != geteuid())
            trusted = (uint32_t)uid;
        return 0;
    }
    if (uid == 0)
        return 0;
    if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
        fprintf(stderr, "rlctl: --owner %s: cannot become uid %ld: %s\n", user, (long)uid,
                strerror(errno));
        return EX_OSERR;
    }
    /* Proof that root is gone for good, not just from the effective ids. */
    if (setuid(0) == 0 || geteuid() != uid || getuid() != uid) {
        fprintf(stderr, "rlctl: --owner %s: could not drop root for good\n", user);
        return EX_OSERR;
    }
    return 0;
}

/* The remedy for SRL_EACCES on NAME, from the file's real owner and mode
 * and whether this process can open it at all (srl_open_explain). */
void rlctl_owner_remedy(const char *name)
{
    srl_config cfg;
    char msg[512];
    srl_config_init(&cfg);
    cfg.owner_uid = trusted;
    if (srl_open_explain(name, &cfg, msg, sizeof msg) == SRL_EINVAL)
        fputs(": run rlctl as the segment's owner", stderr);
    else
        fprintf(stderr, ": %s", msg);
}

void rlctl_owner_name(uint32_t uid, char *buf, size_t len)
{
    struct passwd pw, *res = NULL;
    char scratch[1024];
    if (getpwuid_r((uid_t)uid, &pw, scratch, sizeof scratch, &res) == 0 && res != NULL)
        snprintf(buf, len, "%s", res->pw_name);
    else
        snprintf(buf, len, "%u", uid);
}
