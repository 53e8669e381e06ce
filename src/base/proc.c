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

/* From /proc/PID/stat: field 3 (the state letter) into *state and field 22
 * (the start time) returned, or 0 (and *state 0) if unreadable.  The
 * command name (field 2) is in parentheses and may hold spaces or ')':
 * fields are counted from the last ')'. */
static uint64_t stat_of(int32_t pid, char *state)
{
    char path[64], buf[1024];
    *state = 0;
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
    if (p == NULL || p[1] != ' ')
        return 0;
    p++;
    *state = p[1];
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

/* Two /proc reads per call would be paid by every srl_enter: cached per
 * thread (no sharing, no lock) and recomputed when the pid changes (after
 * fork the child's copy still names the parent). */
void srl__proc_self(struct srl__proc *p)
{
    static _Thread_local struct srl__proc self;
    int32_t pid = (int32_t)getpid();
    if (self.pid != pid) {
        char state;
        self.start = stat_of(pid, &state);
        self.pidns = pid_ns();
        self.pid = pid;
    }
    *p = self;
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
    char state;
    uint64_t now = stat_of(p->pid, &state);
    /* A zombie (killed, not yet reaped by its parent) has exited: its units
     * must not wait for the parent's next reaping pass. */
    if (state == 'Z' || state == 'X')
        return SRL__PROC_DEAD;
    if (p->start != 0 && now != 0 && now != p->start)
        return SRL__PROC_DEAD;   /* the pid was reused */
    return SRL__PROC_ALIVE;
}

int srl__proc_alive(const struct srl__proc *p, void *ctx)
{
    (void)ctx;
    return srl__proc_state(p) != SRL__PROC_DEAD;
}
