/*
 * testhooks_shm.c - the hook points of segment creation (testhooks.h:
 * SRL__ROOM_SRC, SRL__SHM_PARK_BUILT).  Compiled into the test copy of the
 * library only (src/meson.build), never into the shipped libsrl.
 *
 * Process-global state, set by a test before it forks: the fake files of
 * the room check, and the park of the next creator.
 */
#include "shm.h"
#include "testhooks.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static struct srl__room_src fake_src;
static int faked;
static int park_report = -1, park_go = -1;

void srl__room_set_test_src(const struct srl__room_src *fake)
{
    faked = fake != NULL;
    if (faked)
        fake_src = *fake;
}

const struct srl__room_src *srl__room_test_src(const struct srl__room_src *real)
{
    static struct srl__room_src mixed;
    if (!faked)
        return real;
    mixed.meminfo = fake_src.meminfo != NULL ? fake_src.meminfo : real->meminfo;
    mixed.proc_cgroup = fake_src.proc_cgroup != NULL ? fake_src.proc_cgroup : real->proc_cgroup;
    mixed.cgroup_root = fake_src.cgroup_root != NULL ? fake_src.cgroup_root : real->cgroup_root;
    mixed.shm_dir = fake_src.shm_dir != NULL ? fake_src.shm_dir : real->shm_dir;
    mixed.guard = fake_src.guard != 0 ? fake_src.guard : real->guard;
    return &mixed;
}

void srl__shm_set_test_park_built(int report_fd, int go_fd)
{
    park_report = report_fd;
    park_go = go_fd;
}

void srl__shm_test_park_built(int fd)
{
    if (park_report < 0)
        return;
    int report = park_report, go = park_go;
    park_report = park_go = -1;
    struct stat st;
    uint64_t ino = fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
    if (write(report, &ino, sizeof ino) != (ssize_t)sizeof ino)
        return;
    char c;
    while (read(go, &c, 1) < 0) {
    }
}
