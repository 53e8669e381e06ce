/*
 * proc.h - who a process is, in a way a reused pid cannot fake (internal).
 *
 * A pid alone names a process only within one PID namespace and only until
 * it is reused.  srl records a process as (pid, start time, PID namespace):
 * the start time is field 22 of /proc/PID/stat (clock ticks since boot,
 * fixed for the life of the process), the namespace is the inode of
 * /proc/self/ns/pid.  A record from another namespace cannot be judged from
 * here (its pid means nothing in ours): such a process counts as alive, so
 * nothing of it is taken away on a guess.  Where /proc is missing the start
 * time reads 0 and liveness falls back to kill(pid, 0).
 *
 * Used for a segment's creator (a loser of the creation race tells a dead
 * creator from a slow one).  No locks, no shared state: pure queries.
 */
#ifndef SRL_PROC_H
#define SRL_PROC_H

#include <stdint.h>

struct srl__proc {
    int32_t pid;
    uint64_t start;           /* 0: unknown */
    uint64_t pidns;           /* 0: unknown */
};

enum { SRL__PROC_DEAD = 0, SRL__PROC_ALIVE = 1, SRL__PROC_UNKNOWN = 2 };

/* The calling process. */
void srl__proc_self(struct srl__proc *p);

/* SRL__PROC_DEAD if p has certainly exited (no such pid, a zombie not yet
 * reaped, or that pid is now another process), SRL__PROC_ALIVE if it runs
 * (a stopped process too), SRL__PROC_UNKNOWN if it is
 * in another PID namespace. */
int srl__proc_state(const struct srl__proc *p);

/* The liveness test the stores give the holder table (srl__conc_alive_fn):
 * 0 only for a process that has certainly exited; one in another PID
 * namespace, or that cannot be judged, is alive.  ctx is unused. */
int srl__proc_alive(const struct srl__proc *p, void *ctx);

#endif
