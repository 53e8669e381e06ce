/*
 * redis_testutil.h - a real redis-server for a test: started on a unix
 * socket in the caller's temporary directory, no persistence, no TCP port,
 * stopped by its pid.  Used by check_redis and the rlctl suite.  Also a
 * hostile fake (tests/fake_redis.py) for check_redis_hostile.
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

/* 8 forked processes (test_fork), started together, each srl_acquire()s
 * key with cost 1 until its first denial; returns the admissions of all,
 * or UINT32_MAX if a child's call failed.  _tier: srl_acquire_tier(tier). */
struct srl_limiter;
unsigned redis_fork_flood(struct srl_limiter *lim, const char *key);
unsigned redis_fork_flood_tier(struct srl_limiter *lim, unsigned tier, const char *key);

/*
 * A Redis Cluster of three masters on loopback TCP ports (redis-cli
 * --cluster create needs TCP: it does not take unix sockets), each port
 * and its bus port (+10000) found free by binding them first.  Started
 * with --cluster-enabled yes, no persistence, files in dir; joined by
 * redis-cli --cluster create --cluster-replicas 0 --cluster-yes; ready
 * once every node's CLUSTER INFO says cluster_state:ok.  Meant for an
 * unchecked fixture (the test runner's process), so that the servers are
 * stopped by pid even when a test fails: on a setup failure it stops what
 * it started and aborts.
 */
#define REDIS_CLUSTER_N 3
struct redis_cluster {
    char dir[64];
    int port[REDIS_CLUSTER_N];
    pid_t pid[REDIS_CLUSTER_N];
    char id[REDIS_CLUSTER_N][48];   /* CLUSTER MYID */
    char uri[160];                 /* redis-cluster://127.0.0.1:P0,... */
};
void redis_cluster_start(struct redis_cluster *c);
void redis_cluster_stop(struct redis_cluster *c);
/* The index of the node that serves slot now (CLUSTER SLOTS of node 0
 * ... asked of every node until one answers), -1 if none does. */
int redis_cluster_owner(const struct redis_cluster *c, unsigned slot);

/*
 * The hostile fake Redis (tests/fake_redis.py MODE [--once], its path in
 * $FAKE_REDIS_PY) on a loopback port.  It prints one line per event; every line read is kept in log[],
 * so a test can wait for an event (fake_redis_wait) and, after the call
 * it tests, ask whether one ever happened (fake_redis_saw).  Its stdin is
 * a pipe from the test: it exits when the test's process does, even one
 * that failed half way.
 */
struct fake_redis {
    pid_t pid;
    int in_fd, out_fd;   /* its stdin (write end), its stdout (read end) */
    int port;
    char log[16384];
    size_t len;
};
/* Start it and wait for "ready PORT".  Fails the test if it cannot. */
void fake_redis_start(struct fake_redis *f, const char *mode, int once);
/* Read its lines until one starts with prefix (kept in log): 1, or 0 if it
 * exited first.  Bounded by the test's own timeout. */
int fake_redis_wait(struct fake_redis *f, const char *prefix);
/* How many lines of the log so far start with prefix. */
int fake_redis_saw(const struct fake_redis *f, const char *prefix);
/* Kill it, reap it, and read what it printed before it died into log. */
void fake_redis_stop(struct fake_redis *f);

#endif
