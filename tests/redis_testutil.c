/*
 * redis_testutil.c - start and stop a redis-server for a test (see the
 * header).  Readiness is a bounded poll of the socket (the test's own
 * timeout bounds it), never a sleep hoped to be long enough.
 */
#include "redis_testutil.h"

#include <check.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int sock_ready(const char *sock)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

pid_t redis_server_start(const char *dir, const char *sock, const char *const *extra)
{
    unlink(sock);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        const char *argv[16] = {"redis-server", "--port", "0", "--unixsocket", sock,
                                "--save", "", "--appendonly", "no", "--dir", dir};
        for (int i = 0; i < 4 && extra != NULL && extra[i] != NULL; i++)
            argv[11 + i] = extra[i];
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    while (!sock_ready(sock)) {
        int st;
        ck_assert_int_eq(waitpid(pid, &st, WNOHANG), 0);
        usleep(5000);
    }
    return pid;
}

void redis_server_stop(pid_t pid)
{
    kill(pid, SIGCONT);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

long long redis_command_calls(const char *sock, const char *cmd)
{
    redisContext *c = redisConnectUnix(sock);
    ck_assert(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "INFO commandstats");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    char field[64];
    int n = snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
    const char *at = strstr(r->str, field);
    long long calls = at != NULL ? atoll(at + n) : 0;
    freeReplyObject(r);
    redisFree(c);
    return calls;
}
