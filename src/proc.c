/*
 * proc.c - process identity (see proc.h): /proc reads, no state.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Field 22 of /proc/PID/stat, or 0.  The command name (field 2) is in
 * parentheses and may hold spaces or ')': fields are counted from the last
 * ')'. */
static uint64_t start_time(int32_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    p++;
    /* After ')': field 3 (state) is the first token; 22 is the 20th. */
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (p == NULL)
            return 0;
    }
    char *end;
    unsigned long long v = strtoull(p + 1, &end, 10);
    return end == p + 1 ? 0 : (uint64_t)v;
}

static uint64_t pid_ns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

void srl__proc_self(struct srl__proc *p)
{
    p->pid = (int32_t)getpid();
    p->start = start_time(p->pid);
    p->pidns = pid_ns();
}

int srl__proc_state(const struct srl__proc *p)
{
    if (p->pid <= 0)
        return SRL__PROC_DEAD;
    uint64_t ns = pid_ns();
    if (p->pidns != 0 && ns != 0 && p->pidns != ns)
        return SRL__PROC_UNKNOWN;
    if (kill((pid_t)p->pid, 0) != 0 && errno == ESRCH)
        return SRL__PROC_DEAD;
    if (p->start != 0) {
        uint64_t now = start_time(p->pid);
        if (now != 0 && now != p->start)
            return SRL__PROC_DEAD;   /* the pid was reused */
    }
    return SRL__PROC_ALIVE;
}
