/*
 * park_testutil.h - a creator parked mid-build (the SRL__SHM_PARK_BUILT
 * hook of the test library, src/base/testhooks.h), for the suites that link it
 * (check_shm_segment.c, check_shm_room.c).
 *
 * fork_parked_creator forks a child that creates name with cfg; it parks
 * once its segment's whole size is reserved and before the table is built
 * or the file named.  It returns with the child parked: *ino is the
 * child's unnamed file's inode, *go the descriptor whose one byte (or
 * close) lets it go on.  The child exits 0 if its open succeeded.
 */
#ifndef SRL_PARK_TESTUTIL_H
#define SRL_PARK_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "testutil.h"

static inline pid_t fork_parked_creator(const char *name, const srl_config *cfg, int *go,
                                        uint64_t *ino)
{
    int report[2], wait_go[2];
    ck_assert_int_eq(pipe(report), 0);
    ck_assert_int_eq(pipe(wait_go), 0);
    srl__shm_set_test_park_built(report[1], wait_go[0]);
    pid_t pid = test_fork();
    if (pid == 0) {
        srl_limiter *lim;
        _exit(srl_open_shared(name, cfg, SRL_CREATE, &lim) == 0 ? 0 : 1);
    }
    srl__shm_set_test_park_built(-1, -1);
    close(report[1]);
    close(wait_go[0]);
    ck_assert_int_eq(read(report[0], ino, sizeof *ino), (ssize_t)sizeof *ino);
    close(report[0]);
    ck_assert_uint_ne(*ino, 0);
    *go = wait_go[1];
    return pid;
}

#endif
