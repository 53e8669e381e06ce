/*
 * redis_testutil.h - a real redis-server for a test: started on a unix
 * socket in the caller's temporary directory, no persistence, no TCP port,
 * stopped by its pid.  Used by check_redis and the rlctl suite.
 */
#ifndef SRL_REDIS_TESTUTIL_H
#define SRL_REDIS_TESTUTIL_H

#include <sys/types.h>

/* Start redis-server on sock (its files in dir), with extra arguments
 * (NULL-ended, may be NULL); returns its pid once it accepts connections.
 * Fails the current Check test if it cannot start. */
pid_t redis_server_start(const char *dir, const char *sock, const char *const *extra);
/* SIGCONT (it may be stopped), SIGKILL, reap. */
void redis_server_stop(pid_t pid);
/* The server's count of calls of command cmd, lower case ("evalsha",
 * "scan"), from INFO commandstats (0 if never called).  Fails the test if
 * the server does not answer. */
long long redis_command_calls(const char *sock, const char *cmd);

#endif
