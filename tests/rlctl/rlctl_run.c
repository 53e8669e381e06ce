/* rlctl_run.c - see rlctl_run.h. */
#include "rlctl_run.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static const char *binary(const char *var)
{
    const char *p = getenv(var);
    if (p == NULL || *p == '\0') {
        fprintf(stderr, "%s is not set: run the tests through meson\n", var);
        abort();
    }
    return p;
}

static char *slurp(FILE *f, size_t *len)
{
    fflush(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)(n < 0 ? 0 : n) + 1);
    if (s == NULL)
        abort();
    size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
    s[got] = '\0';
    *len = got;
    return s;
}

/* progress: -1, or the write end of a pipe the child gets as fd 3. */
static int spawn_fd3(child *c, const char *path, const char *const *args, int progress)
{
    size_t n = 0;
    while (args[n] != NULL)
        n++;
    char **argv = calloc(n + 2, sizeof *argv);
    c->out = tmpfile();
    c->err = tmpfile();
    if (argv == NULL || c->out == NULL || c->err == NULL)
        abort();
    argv[0] = (char *)path;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    fflush(NULL);
    c->pid = test_fork();
    if (c->pid == 0) {
        dup2(fileno(c->out), 1);
        dup2(fileno(c->err), 2);
        if (progress >= 0 && dup2(progress, 3) != 3)
            _exit(127);
        execv(path, argv);
        _exit(127);
    }
    free(argv);
    return 0;
}

static int spawn(child *c, const char *path, const char *const *args)
{
    c->progress = -1;
    return spawn_fd3(c, path, args, -1);
}

static void collect(child *c, int wstatus, run_result *r)
{
    r->status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    r->out = slurp(c->out, &r->out_len);
    r->err = slurp(c->err, &r->err_len);
    fclose(c->out);
    fclose(c->err);
    c->out = c->err = NULL;
    if (c->progress >= 0)
        close(c->progress);
    c->progress = -1;
    c->pid = 0;
}

int child_poll(child *c, run_result *r)
{
    int ws;
    pid_t p = waitpid(c->pid, &ws, WNOHANG);
    if (p == 0)
        return 0;
    if (p < 0)
        abort();
    collect(c, ws, r);
    return 1;
}

void child_wait(child *c, run_result *r)
{
    int ws;
    if (waitpid(c->pid, &ws, 0) != c->pid)
        abort();
    collect(c, ws, r);
}

int run_rlctl_argv(run_result *r, const char *const *args)
{
    child c;
    spawn(&c, binary("RLCTL"), args);
    child_wait(&c, r);
    return r->status;
}

int run_rlctl(run_result *r, ...)
{
    const char *args[32];
    size_t n = 0;
    va_list ap;
    va_start(ap, r);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 31)
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return run_rlctl_argv(r, args);
}

void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

int worker_start(child *c, const char *name, const char *min_rounds, char *const *hexkeys,
                 size_t nkeys)
{
    const char **args = calloc(nkeys + 4, sizeof *args);
    if (args == NULL)
        abort();
    args[0] = name;
    args[1] = "until-stopped";
    args[2] = min_rounds;
    for (size_t i = 0; i < nkeys; i++)
        args[3 + i] = hexkeys[i];
    /* Both ends non-blocking and close-on-exec (dup2 onto fd 3 clears it
     * in this worker only), so no other child holds the write end. */
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
        abort();
    spawn_fd3(c, binary("RLCTL_WORKER"), args, fds[1]);
    close(fds[1]);
    c->progress = fds[0];
    free(args);
    return 0;
}

unsigned child_progress(child *c)
{
    unsigned n = 0;
    char buf[256];
    ssize_t got;
    while (c->progress >= 0 && (got = read(c->progress, buf, sizeof buf)) > 0)
        n += (unsigned)got;
    return n;
}

void child_stop(child *c)
{
    if (c->pid > 0 && kill(c->pid, SIGTERM) != 0)
        abort();
}

/* Test-only state: the current test case's name prefix. */
static char prefix[128];

void seg_prefix_init(void)
{
    snprintf(prefix, sizeof prefix, "%s", unique_name("rlctl"));
}

void seg_prefix_cleanup(void)
{
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    size_t n = strlen(prefix + 1);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix + 1, n) == 0 && e->d_name[n] == '-') {
            char path[512];
            snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
            unlink(path);
        }
    closedir(d);
}

const char *seg_name(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "%s-%s", prefix, tag);
    return buf;
}

int printable_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '\n' && (c < 0x20 || c > 0x7e))
            return 0;
    }
    return 1;
}
