/*
 * prefork_demo.c - the README's main job: N pre-forked workers, one limit.
 *
 * The parent creates a named shared segment, forks the workers, and each
 * worker opens the same name (as an unrelated PHP-FPM or Apache child would)
 * and sends requests for one key, one every ~100 us.  Every worker sees only
 * its own share, yet together they admit exactly the policy's permits: the
 * limit is host-wide, not per process.  The parent then prints the counts,
 * one denied request's HTTP headers, and the segment's statistics.
 *
 * Usage: prefork_demo [WORKERS [REQUESTS_PER_WORKER [POLICY]]]
 * Exit status 0 when the host-wide count is what one shared limit allows:
 * exactly the permits when nothing can refill during the run, else between
 * the permits and what refills add (see main); 1 otherwise.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srl.h"

struct tally {
    long allowed, denied;
};

static int die(const char *what, int rc)
{
    fprintf(stderr, "prefork_demo: %s: %s\n", what, srl_strerror(rc));
    return 2;
}

/* One worker: open the segment by name, wait for the start signal (the
 * parent closing `go`), hammer the key, report on fd. */
static int worker(const char *name, long requests, int go, int fd)
{
    srl_limiter *lim;
    int rc = srl_open_shared(name, NULL, 0, &lim);
    if (rc != 0)
        return die("worker open", rc);
    char c;
    while (read(go, &c, 1) > 0)
        ;
    struct tally t = {0, 0};
    static const char key[] = "alice";
    for (long i = 0; i < requests; i++) {
        srl_decision d;
        rc = srl_acquire(lim, key, sizeof key - 1, 1, &d);
        if (rc != 0)
            return die("acquire", rc);
        if (d.allowed)
            t.allowed++;
        else
            t.denied++;
        usleep(100); /* a request's worth of work, so the workers interleave */
    }
    srl_close(lim);
    return write(fd, &t, sizeof t) == (ssize_t)sizeof t ? 0 : 2;
}

static void print_denied_response(srl_limiter *lim, const srl_policy *p)
{
    srl_decision d;
    if (srl_acquire(lim, "alice", 5, 1, &d) != 0 || d.allowed)
        return;
    char retry[32], pol[128], now[128];
    srl_format_retry_after(&d, retry, sizeof retry);
    srl_format_ratelimit_policy(p, NULL, pol, sizeof pol);
    srl_format_ratelimit(&d, NULL, now, sizeof now);
    printf("the next request gets:\n  HTTP/1.1 429 Too Many Requests\n"
           "  Retry-After: %s\n  RateLimit-Policy: %s\n  RateLimit: %s\n",
           retry, pol, now);
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 4;
    long requests = argc > 2 ? atol(argv[2]) : 1000;
    const char *text = argc > 3 ? argv[3] : "token_bucket:100/1h";
    if (workers < 1 || workers > 256 || requests < 1) {
        fprintf(stderr, "usage: prefork_demo [WORKERS [REQUESTS_PER_WORKER [POLICY]]]\n");
        return 64;
    }

    srl_config cfg;
    srl_config_init(&cfg);
    int rc = srl_policy_parse(text, &cfg.policy);
    if (rc != 0)
        return die(text, rc);
    cfg.capacity = 1024;
    cfg.key_display = 16;

    char name[64];
    snprintf(name, sizeof name, "/srl-demo-%ld", (long)getpid());
    srl_limiter *lim;
    rc = srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim);
    if (rc != 0)
        return die(name, rc);

    char ptext[SRL_POLICY_TEXT_MAX];
    srl_policy_format(&cfg.policy, ptext, sizeof ptext);
    printf("srl pre-fork demo: %d workers x %ld requests for key \"alice\", "
           "policy %s, segment %s\n", workers, requests, ptext, name);

    int fds[256][2], go[2];
    pid_t pids[256];
    if (pipe(go) != 0) {
        perror("prefork_demo: pipe");
        return 2;
    }
    for (int i = 0; i < workers; i++) {
        if (pipe(fds[i]) != 0 || (pids[i] = fork()) < 0) {
            perror("prefork_demo: fork");
            srl_unlink(name);
            return 2;
        }
        if (pids[i] == 0) {
            close(fds[i][0]);
            close(go[1]);
            _exit(worker(name, requests, go[0], fds[i][1]));
        }
        close(fds[i][1]);
    }
    close(go[0]);
    close(go[1]); /* every worker starts now, together */
    uint64_t t0 = srl_monotonic_ns(NULL);

    long allowed = 0, total = 0;
    int failed = 0;
    for (int i = 0; i < workers; i++) {
        struct tally t = {0, 0};
        int status = 0;
        ssize_t n = read(fds[i][0], &t, sizeof t);
        close(fds[i][0]);
        waitpid(pids[i], &status, 0);
        if (n != (ssize_t)sizeof t || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "prefork_demo: worker %d failed\n", i + 1);
            failed = 1;
            continue;
        }
        printf("  worker %d (pid %ld): %4ld allowed, %4ld denied\n", i + 1,
               (long)pids[i], t.allowed, t.denied);
        allowed += t.allowed;
        total += t.allowed + t.denied;
    }
    uint64_t run_ns = srl_monotonic_ns(NULL) - t0;
    /* What the limit allows over the run: the permits, plus what a policy
     * that refills may hand out again while it runs.  No algorithm admits
     * more than permits in any window, so over run_ns at most
     * permits * (1 + ceil(run_ns / window)).  When the run is shorter than
     * one permit's refill time (window / permits) nothing can refill and
     * the count must be exact. */
    uint64_t w = cfg.policy.window_ns, n = cfg.policy.permits;
    int refills = run_ns * n >= w;
    uint64_t most = refills ? n * (1 + (run_ns + w - 1) / w) : n;
    printf("host-wide: %ld allowed of %ld requests in %.3f s; the limit is %u per %.3f s\n",
           allowed, total, (double)run_ns / 1e9, cfg.policy.permits, (double)w / 1e9);
    if (refills)
        printf("  the policy refills during the run: at most %llu may pass\n",
               (unsigned long long)most);
    print_denied_response(lim, &cfg.policy);

    srl_stats st;
    if (srl_stats_get(lim, &st) == 0)
        printf("segment stats: %llu keys, %llu allowed, %llu denied, %llu table-full\n",
               (unsigned long long)st.used, (unsigned long long)st.allowed,
               (unsigned long long)st.denied, (unsigned long long)st.full);
    srl_close(lim);
    srl_unlink(name);

    int ok = !failed && allowed >= (long)n && (uint64_t)allowed <= most;
    printf("%s\n", ok ? "OK: one limit enforced across all workers"
                      : "FAIL: the workers did not share one limit");
    return ok ? 0 : 1;
}
