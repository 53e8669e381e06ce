/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint64_t fake_clock_read(void *ctx)
{
    return __atomic_load_n(&((fake_clock *)ctx)->now, __ATOMIC_SEQ_CST);
}

fake_clock *fake_clock_shared(uint64_t start)
{
    fake_clock *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) {
        perror("mmap");
        abort();
    }
    c->now = start;
    return c;
}

void *shared_zeroed(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        abort();
    }
    return p;   /* anonymous pages start zeroed */
}

srl_ticker fake_ticker(fake_clock *c)
{
    srl_ticker t = {fake_clock_read, c};
    return t;
}

const char *unique_name(const char *tag)
{
    static __thread char buf[128];
    static unsigned counter;
    snprintf(buf, sizeof buf, "/srl-test-%ld-%u-%s", (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED), tag);
    return buf;
}

char proc_stat_state(const char *stat_path)
{
    char buf[512];
    FILE *f = fopen(stat_path, "r");
    if (f == NULL)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *q = strrchr(buf, ')');   /* the command may hold ") " itself */
    return q != NULL && q[1] == ' ' && q[2] != '\0' ? q[2] : '?';
}

/* Set in every process test_fork made (and their children): there a failed
 * fork ends the process with 127, never a Check call. */
static int forked_child;

pid_t test_fork_undo(void (*undo)(void *), void *arg)
{
    pid_t pid = fork();
    if (pid == 0)
        forked_child = 1;
    if (pid < 0) {
        int e = errno;
        if (forked_child)
            _exit(127);
        if (undo != NULL)
            undo(arg);
        ck_abort_msg("fork: %s", strerror(e));
    }
    return pid;
}

pid_t test_fork(void)
{
    return test_fork_undo(NULL, NULL);
}

uint32_t left_after_one(srl_limiter *lim, const char *key, const srl_limits *l)
{
    srl_decision d;
    int rc = l != NULL ? srl_acquire_limits(lim, key, strlen(key), l, 1, &d)
                       : srl_acquire(lim, key, strlen(key), 1, &d);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(d.allowed, 1);
    return d.remaining;
}
