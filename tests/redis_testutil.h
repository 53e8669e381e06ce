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

#endif
