/*
 * explain.c - srl_open_explain: why an open of a segment was refused
 * (SRL_EACCES), from the file's owner and mode and the caller's ids.
 *
 * Only reads: one stat(2) of the segment's file and the password database;
 * no segment is mapped, nothing is changed, no lock is taken.  The file
 * may change between the refused open and this call: the sentence then
 * describes the file as it is now, which is what the fix must act on.
 * Safe from any thread (getpwuid_r).
 */
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srl.h"

/* The user name of uid into buf ("www-data"), or its number. */
static void user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd pw, *res = NULL;
    char scratch[1024];
    if (getpwuid_r(uid, &pw, scratch, sizeof scratch, &res) == 0 && res != NULL)
        snprintf(buf, len, "%s", res->pw_name);
    else
        snprintf(buf, len, "%lu", (unsigned long)uid);
}

__attribute__((format(printf, 3, 4)))
static int put(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= len ? SRL_ENOBUFS : 0;
}

int srl_open_explain(const char *name, const srl_config *cfg, char *msg, size_t len)
{
    if (name == NULL || msg == NULL || len == 0 || name[0] != '/' || strchr(name + 1, '/') != NULL ||
        strlen(name) > 255)
        return SRL_EINVAL;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", name + 1);
    struct stat st;
    if (stat(path, &st) != 0)
        return put(msg, len, "segment %s cannot be looked at (%s)", name, strerror(errno));
    uid_t me = geteuid();
    char owner[64], self[64];
    user_name(st.st_uid, owner, sizeof owner);
    user_name(me, self, sizeof self);
    unsigned mode = (unsigned)(st.st_mode & 0777);
    uint32_t trusted = cfg != NULL ? cfg->owner_uid : SRL_OWNER_SELF;
    if (st.st_uid != me && access(path, R_OK | W_OK) != 0)
        return put(msg, len,
                   "segment %s is owned by %s (uid %lu), mode %04o; this process runs as %s "
                   "(uid %lu), which cannot open it: run as %s, or create it owned by the "
                   "user that uses it (rlctl --owner USER create ...), or with mode 0660 and "
                   "a group both share",
                   name, owner, (unsigned long)st.st_uid, mode, self, (unsigned long)me, owner);
    if (st.st_uid != me && (uint32_t)st.st_uid != trusted)
        return put(msg, len,
                   "segment %s is owned by %s (uid %lu), mode %04o; this process runs as %s "
                   "(uid %lu), and srl maps only its caller's own segments or those of the "
                   "one trusted owner: run as %s (rlctl --owner %s ...), or trust uid %lu "
                   "(owner=%lu)",
                   name, owner, (unsigned long)st.st_uid, mode, self, (unsigned long)me, owner,
                   owner, (unsigned long)st.st_uid, (unsigned long)st.st_uid);
    uint32_t most = cfg != NULL && cfg->mode != 0 ? cfg->mode : 0600;
    if ((mode & 022) & ~most)
        return put(msg, len,
                   "segment %s is owned by %s (uid %lu), mode %04o: group or others may write "
                   "it, which this opener does not accept (mode %04o): chmod 600 the file if "
                   "nobody else should, or if they are trusted open with mode=%04o (rlctl --mode %04o ...)",
                   name, owner, (unsigned long)st.st_uid, mode, most, mode, mode);
    return put(msg, len, "segment %s is owned by %s (uid %lu), mode %04o; this process runs "
               "as %s (uid %lu)", name, owner, (unsigned long)st.st_uid, mode, self,
               (unsigned long)me);
}
