/*
 * check_shm_room.c - a new segment must fit in the memory the kernel can
 * give, and one above the size guard needs SRL_CONFIG_FORCE (srl.h, ROOM);
 * a creator that dies mid-build leaves nothing.
 *
 *   - a faked MemAvailable of 100 MiB refuses a 200 MiB segment (exact
 *     code and sentence, from the open and from srl_room_check), and
 *     nothing appears at the name; anonymous segments are checked too;
 *   - a cgroup's limit less its usage, smaller than MemAvailable, wins:
 *     the caller's own (v2), an ancestor's, v1's memory hierarchy;
 *   - above a (faked, small) size guard: SRL_ETOOBIG without force, made
 *     with it; force never passes a segment that does not fit;
 *   - a creator SIGKILLed after reserving its segment, before naming it,
 *     leaves no file at the name and no file of its inode in /dev/shm.
 *
 * The memory figures come from fake files (srl__room_set_test_src, the
 * test copy of the library): no real segment made here is above 50 MiB.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "testutil.h"
#include "shm_testutil.h"
#include "park_testutil.h"

#define MiB (1024ull * 1024ull)

static char dir[64];

static srl_config config(uint64_t capacity, uint32_t flags)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = 10,
                              .window_ns = 60 * SEC};
    cfg.capacity = capacity;
    cfg.flags = flags;
    return cfg;
}

/* dir/rel holds text (its directories made as needed). */
static void put(const char *rel, const char *text)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The room check reads dir's files: meminfo with MemAvailable avail_kb,
 * proc_cgroup's text, and a cgroup tree under dir/cg; guard 0: the real. */
static void fake(uint64_t avail_kb, const char *proc_cgroup, uint64_t guard)
{
    char text[200], meminfo[100], cg[100], root[100];
    snprintf(text, sizeof text, "MemTotal:       99999999 kB\nMemFree:        1 kB\n"
                                "MemAvailable:   %llu kB\nBuffers:        0 kB\n",
             (unsigned long long)avail_kb);
    put("meminfo", text);
    put("cgroup", proc_cgroup);
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", dir);
    snprintf(cg, sizeof cg, "%s/cgroup", dir);
    snprintf(root, sizeof root, "%s/cg", dir);
    static char keep[3][100];
    strcpy(keep[0], meminfo);
    strcpy(keep[1], cg);
    strcpy(keep[2], root);
    struct srl__room_src src = {.meminfo = keep[0], .proc_cgroup = keep[1],
                                .cgroup_root = keep[2], .guard = guard};
    srl__room_set_test_src(&src);
}

static void setup(void)
{
    strcpy(dir, "/tmp/srl-room-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static void assert_no_file(const char *name)
{
    char path[300];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    ck_assert_msg(lstat(path, &st) == -1 && errno == ENOENT, "%s exists", path);
}

/* The open of a new name with cfg refuses with code and creates nothing;
 * srl_room_check says want. */
static void assert_refused(const srl_config *cfg, int code, const char *want)
{
    char name[128], msg[512];
    strcpy(name, unique_name("room"));
    srl_limiter *lim = (srl_limiter *)0x1;
    ck_assert_int_eq(srl_open_shared(name, cfg, SRL_CREATE, &lim), code);
    ck_assert_ptr_null(lim);
    assert_no_file(name);
    ck_assert_int_eq(srl_room_check(cfg, msg, sizeof msg), code);
    ck_assert_str_eq(msg, want);
}

/* The open of a new name with cfg makes it; it is then removed. */
static void assert_made(const srl_config *cfg)
{
    char name[128], msg[512] = "x";
    strcpy(name, unique_name("room"));
    srl_limiter *lim;
    ck_assert_int_eq(srl_room_check(cfg, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "");
    ck_assert_int_eq(srl_open_shared(name, cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}

START_TEST(memavailable_of_100_mib_refuses_a_200_mib_segment_and_makes_nothing)
{
    fake(100 * 1024, "0::/\n", 0);
    srl_config cfg = config(2621440, 0);   /* 200.1 MiB (80-byte slots and the operator area, layout 9) */
    assert_refused(&cfg, SRL_ENOSPC,
                   "the segment needs 200.1 MiB (capacity 2621440 keys); the kernel can give "
                   "95.0 MiB (MemAvailable 100.0 MiB, cgroup limit none, margin 5%): lower the "
                   "capacity, or free memory");
    cfg.flags = SRL_CONFIG_FORCE;          /* force is no way past memory */
    assert_refused(&cfg, SRL_ENOSPC,
                   "the segment needs 200.1 MiB (capacity 2621440 keys); the kernel can give "
                   "95.0 MiB (MemAvailable 100.0 MiB, cgroup limit none, margin 5%): lower the "
                   "capacity, or free memory");
    srl_limiter *lim = (srl_limiter *)0x1;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_ENOSPC);
    ck_assert_ptr_null(lim);
    /* What fits still opens: 0.07 MiB. */
    cfg = config(1000, 0);
    assert_made(&cfg);
}
END_TEST

START_TEST(a_cgroup_limit_smaller_than_memavailable_wins)
{
    srl_config cfg = config(640000, 0);    /* 48.9 MiB */
    /* v2: the caller's own cgroup, 64 MiB with 16 used (its parent has none). */
    fake(1024 * 1024, "0::/srl/leaf\n", 0);
    put("cg/srl/memory.max", "max\n");
    put("cg/srl/memory.current", "999\n");
    put("cg/srl/leaf/memory.max", "67108864\n");
    put("cg/srl/leaf/memory.current", "16777216\n");
    assert_refused(&cfg, SRL_ENOSPC,
                   "the segment needs 48.9 MiB (capacity 640000 keys); the kernel can give "
                   "45.6 MiB (MemAvailable 1.0 GiB, cgroup limit 64.0 MiB, 16.0 MiB used, "
                   "margin 5%): lower the capacity, or free memory");
    /* An ancestor's limit binds too: the leaf unlimited, its parent 40 MiB. */
    put("cg/srl/leaf/memory.max", "max\n");
    put("cg/srl/memory.max", "41943040\n");
    put("cg/srl/memory.current", "0\n");
    assert_refused(&cfg, SRL_ENOSPC,
                   "the segment needs 48.9 MiB (capacity 640000 keys); the kernel can give "
                   "38.0 MiB (MemAvailable 1.0 GiB, cgroup limit 40.0 MiB, 0 bytes used, "
                   "margin 5%): lower the capacity, or free memory");
    /* v1's memory hierarchy (a hybrid host: v2 without the controller). */
    fake(1024 * 1024, "4:memory:/v1grp\n0::/\n", 0);
    put("cg/memory/v1grp/memory.limit_in_bytes", "33554432\n");
    put("cg/memory/v1grp/memory.usage_in_bytes", "0\n");
    put("cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
    assert_refused(&cfg, SRL_ENOSPC,
                   "the segment needs 48.9 MiB (capacity 640000 keys); the kernel can give "
                   "30.4 MiB (MemAvailable 1.0 GiB, cgroup limit 32.0 MiB, 0 bytes used, "
                   "margin 5%): lower the capacity, or free memory");
    /* v1's "no limit" is no limit: the same segment is made. */
    put("cg/memory/v1grp/memory.limit_in_bytes", "9223372036854771712\n");
    assert_made(&cfg);
}
END_TEST

START_TEST(above_the_size_guard_only_with_force)
{
    fake(1024 * 1024, "0::/\n", 4 * MiB);  /* a 4 MiB guard, 1 GiB available */
    srl_config cfg = config(80000, 0);     /* 6.2 MiB */
    const char *want = "the segment needs 6.2 MiB (capacity 80000 keys), above the size guard "
                       "of 4.0 MiB: check the capacity (a typo such as 400M for 400k?), or pass "
                       "force (rlctl create --force, SRL_CONFIG_FORCE) if this size is meant";
    assert_refused(&cfg, SRL_ETOOBIG, want);
    srl_limiter *lim = (srl_limiter *)0x1;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), SRL_ETOOBIG);
    ck_assert_ptr_null(lim);
    cfg.flags = SRL_CONFIG_FORCE;
    assert_made(&cfg);
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_close(lim);
    /* Force up to what memory can give, not past it. */
    fake(5 * 1024, "0::/\n", 4 * MiB);
    assert_refused(&cfg, SRL_ENOSPC,
                   "the segment needs 6.2 MiB (capacity 80000 keys); the kernel can give "
                   "4.8 MiB (MemAvailable 5.0 MiB, cgroup limit none, margin 5%): lower the "
                   "capacity, or free memory");
    /* An existing segment is opened whatever its size: only creation asks. */
    char name[128];
    strcpy(name, unique_name("room"));
    fake(1024 * 1024, "0::/\n", 0);
    cfg.flags = 0;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_close(lim);
    fake(1024, "0::/\n", 4 * MiB);
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE, &lim), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* 1 if some entry of /dev/shm has inode ino. */
static int shm_has_inode(uint64_t ino)
{
    DIR *d = opendir("/dev/shm");
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)) != NULL)
        found = (uint64_t)e->d_ino == ino;
    closedir(d);
    return found;
}

START_TEST(a_creator_killed_mid_build_leaves_nothing)
{
    srl_config cfg = config(100000, 0);
    char name[128];
    strcpy(name, unique_name("killed"));
    for (int round = 0; round < 3; round++) {
        int go;
        uint64_t ino;
        pid_t pid = fork_parked_creator(name, &cfg, &go, &ino);
        /* Parked: the whole size reserved (posix_fallocate), no table yet. */
        assert_no_file(name);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        assert_no_file(name);
        ck_assert_msg(!shm_has_inode(ino), "the killed creator's file %llu stays in /dev/shm",
                      (unsigned long long)ino);
        close(go);
    }
    /* Nothing stale either: the next creator makes it at once. */
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shm_room");
    TCase *tc = tcase_create("room");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, memavailable_of_100_mib_refuses_a_200_mib_segment_and_makes_nothing);
    tcase_add_test(tc, a_cgroup_limit_smaller_than_memavailable_wins);
    tcase_add_test(tc, above_the_size_guard_only_with_force);
    tcase_add_test(tc, a_creator_killed_mid_build_leaves_nothing);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"room", "killed"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
