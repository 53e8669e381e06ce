/*
 * shm_testutil.c - see shm_testutil.h: writing bytes into a segment file
 * (to damage it on purpose) and sweeping segments a failed test left.
 */
#include "shm_testutil.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void shm_poke(const char *name, size_t off, const void *bytes, size_t n)
{
    int fd = shm_open(name, O_RDWR, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, bytes, n, (off_t)off), (ssize_t)n);
    close(fd);
}

void shm_poke32(const char *name, size_t off, uint32_t v)
{
    shm_poke(name, off, &v, sizeof v);
}

void shm_poke64(const char *name, size_t off, uint64_t v)
{
    shm_poke(name, off, &v, sizeof v);
}

void shm_sweep_leftovers(const char *const *tags, size_t ntags)
{
    DIR *dir = opendir("/dev/shm");
    if (dir == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        long pid;
        unsigned n;
        int used = 0;
        if (sscanf(e->d_name, "srl-test-%ld-%u-%n", &pid, &n, &used) != 2 || used == 0)
            continue;
        const char *tag = e->d_name + used;
        int mine = 0;
        for (size_t i = 0; i < ntags && !mine; i++)
            mine = strcmp(tag, tags[i]) == 0;
        if (!mine || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (shm_unlink(name) == 0)
            fprintf(stderr, "removed %s, left by a failed test\n", name);
    }
    closedir(dir);
}
