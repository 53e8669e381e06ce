/*
 * check_shm_segment.c - the segment's life: the create-or-open race, and
 * every kind of bad segment giving its own clear error without a crash.
 *
 *   - 8 processes opening one new name at once: one creator, all succeed,
 *     one segment;
 *   - wrong magic (EFOREIGN), wrong version or ABI (EVERSION), truncated or
 *     inconsistent geometry (ECORRUPT), another policy, capacity or display
 *     (EMISMATCH), random bytes or a short file at the name (EFOREIGN), an
 *     empty file or a creator that died before READY (ESTALE), a live
 *     creator that never finishes (ETIMEDOUT); a waiter whose creator
 *     failed starts over (and creates the segment itself); a creator
 *     mid-build shows nothing at the name and a second creator waits for
 *     it on the creators' lock, reserving nothing;
 *   - permissions: 0600 whatever the umask, a configured mode honoured, a
 *     group-writable segment refused unless the opener asked for that mode,
 *     a segment owned by another user refused (trust model, docs/design.md);
 *   - a too-small tmpfs (a private mount namespace with 1 MiB over /dev/shm):
 *     SRL_ENOSPC at creation and nothing left behind;
 *   - names, flags and keys out of range: SRL_EINVAL / SRL_EKEY.
 *
 * Bad segments are made by creating a good one and editing the file under
 * /dev/shm by hand, through the header layout in shm.h.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"
#include "srl.h"
#include "testutil.h"
#include "shm_testutil.h"
#include "park_testutil.h"

static srl_config config(uint32_t permits, uint64_t capacity)
{
    srl_config cfg;
    srl_config_init(&cfg);
    cfg.policy = (srl_policy){.algorithm = SRL_TOKEN_BUCKET, .permits = permits, .window_ns = 60 * SEC};
    cfg.capacity = capacity;
    return cfg;
}

static const char *path_of(const char *name)
{
    static char buf[300];
    snprintf(buf, sizeof buf, "/dev/shm%s", name);
    return buf;
}

/* Create a good segment and close it; returns its name. */
static const char *make_segment(const srl_config *cfg)
{
    static char name[128];
    strcpy(name, unique_name("seg"));
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
    srl_close(lim);
    return name;
}

/* open_rc without Check, for forked children (tests/testutil.h says why
 * they must not call it): OUT_LEFT_SET if a failed open left its out
 * pointer set, else the same result. */
#define OUT_LEFT_SET 1000
static int open_rc_quiet(const char *name, const srl_config *cfg, unsigned flags)
{
    srl_limiter *lim = (srl_limiter *)0x1;
    int rc = srl_open_shared(name, cfg, flags, &lim);
    if (rc == 0)
        srl_close(lim);
    else if (lim != NULL)
        return OUT_LEFT_SET;
    return rc;
}

static int open_rc(const char *name, const srl_config *cfg, unsigned flags)
{
    int rc = open_rc_quiet(name, cfg, flags);
    ck_assert_msg(rc != OUT_LEFT_SET, "a failed open of %s left its out pointer set", name);
    return rc;
}

/* Refused with `want` to a creator with cfg and to an opener without a config. */
static void assert_refused_to_creator_and_adopter(const char *name, const srl_config *cfg, int want)
{
    ck_assert_int_eq(open_rc(name, cfg, SRL_CREATE), want);
    ck_assert_int_eq(open_rc(name, NULL, 0), want);
}

/* pid, a child of ours, exits normally with status 0. */
static void assert_child_ok(pid_t pid)
{
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The name no longer exists under /dev/shm. */
static void assert_no_file(const char *name)
{
    struct stat st;
    ck_assert_int_eq(stat(path_of(name), &st), -1);
    ck_assert_int_eq(errno, ENOENT);
}

/* A plain file (not made by srl) of n bytes at the name. */
static void plant_file(const char *name, const void *bytes, size_t n)
{
    int fd = open(path_of(name), O_CREAT | O_EXCL | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bytes, n), (ssize_t)n);
    close(fd);
}

/* A forked creator of name that runs srl__shm_open_test with `test` and
 * exits 0 if its create succeeded. */
static pid_t fork_creator(const char *name, const srl_config *cfg, unsigned test)
{
    pid_t pid = test_fork();
    if (pid == 0) {
        srl_limiter *lim;
        int rc = srl__shm_open_test(name, cfg, SRL_CREATE | SRL_EXCL, test, &lim);
        _exit(rc == 0 ? 0 : 1);
    }
    return pid;
}

/* A creator of name, in this process, that never marks its segment READY. */
static srl_limiter *unfinished_creator(const char *name, const srl_config *cfg)
{
    srl_limiter *creator;
    ck_assert_int_eq(srl__shm_open_test(name, cfg, SRL_CREATE | SRL_EXCL, SRL__SHM_TEST_NO_READY,
                                        &creator), 0);
    return creator;
}

/* A forked child, as uid/gid 65534, opens name with cfg and exits 0 if that
 * was SRL_EACCES (10: it could not change user). */
static pid_t fork_open_as_nobody(const char *name, const srl_config *cfg)
{
    pid_t pid = test_fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(10);
        _exit(open_rc_quiet(name, cfg, 0) == SRL_EACCES ? 0 : 11);
    }
    return pid;
}

/* ------------------------------------------------------- the race */

struct race_area {
    uint32_t arrived;
    int32_t pid[8];
    int32_t creator[8];
    int32_t rc[8];
};

START_TEST(eight_processes_opening_a_new_name_at_once_make_one_segment)
{
    srl_config cfg = config(100, 1000);
    struct race_area *a = shared_zeroed(sizeof *a);
    for (int trial = 0; trial < 10; trial++) {
        char name[128];
        strcpy(name, unique_name("race"));
        memset(a, 0, sizeof *a);
        pid_t pids[8];
        for (int w = 0; w < 8; w++) {
            pids[w] = test_fork();
            if (pids[w] == 0) {
                __atomic_add_fetch(&a->arrived, 1, __ATOMIC_ACQ_REL);
                while (__atomic_load_n(&a->arrived, __ATOMIC_ACQUIRE) < 8)
                    sched_yield();
                srl_limiter *lim;
                int rc = srl_open_shared(name, &cfg, SRL_CREATE, &lim);
                a->rc[w] = rc;
                a->pid[w] = getpid();
                if (rc == 0) {
                    srl_info info;
                    srl_decision d;
                    srl_info_get(lim, &info);
                    a->creator[w] = info.creator_pid;
                    if (srl_acquire(lim, "x", 1, 1, &d) != 0 || !d.allowed)
                        a->rc[w] = 99;
                    srl_close(lim);
                }
                _exit(0);
            }
        }
        for (int w = 0; w < 8; w++)
            assert_child_ok(pids[w]);
        int creators = 0;
        for (int w = 0; w < 8; w++) {
            ck_assert_int_eq(a->rc[w], 0);
            ck_assert_int_eq(a->creator[w], a->creator[0]);   /* one initialiser */
            creators += a->pid[w] == a->creator[0];
        }
        ck_assert_int_eq(creators, 1);
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), 0);
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        ck_assert_uint_eq(st.used, 1);         /* one segment: one state for "x" */
        ck_assert_uint_eq(st.allowed, 8);
        srl_close(lim);
        ck_assert_int_eq(srl_unlink(name), 0);
    }
    munmap(a, sizeof *a);
}
END_TEST

/* ------------------------------------------------------- headers */

START_TEST(a_segment_with_another_magic_is_foreign)
{
    srl_config cfg = config(10, 100);
    const char *name = make_segment(&cfg);
    shm_poke(name, 0, "NOTSRL!!", 8);
    assert_refused_to_creator_and_adopter(name, &cfg, SRL_EFOREIGN);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_segment_of_another_layout_version_or_abi_is_refused)
{
    srl_config cfg = config(10, 100);
    const char *name = make_segment(&cfg);
    shm_poke32(name, offsetof(struct srl__shm_header, version), SRL__SHM_VERSION + 1);
    ck_assert_int_eq(open_rc(name, &cfg, 0), SRL_EVERSION);
    shm_poke32(name, offsetof(struct srl__shm_header, version), SRL__SHM_VERSION);
    ck_assert_int_eq(open_rc(name, &cfg, 0), 0);
    shm_poke64(name, offsetof(struct srl__shm_header, abi), srl__shm_abi_word() ^ 0x10000);
    ck_assert_int_eq(open_rc(name, &cfg, 0), SRL_EVERSION);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_truncated_segment_is_corrupt)
{
    srl_config cfg = config(10, 1000);
    const char *name = make_segment(&cfg);
    struct stat st;
    ck_assert_int_eq(stat(path_of(name), &st), 0);
    ck_assert_int_eq(truncate(path_of(name), st.st_size - 1), 0);
    ck_assert_int_eq(open_rc(name, &cfg, 0), SRL_ECORRUPT);
    ck_assert_int_eq(open_rc(name, NULL, 0), SRL_ECORRUPT);
    ck_assert_int_eq(truncate(path_of(name), SRL__SHM_HEADER_BYTES), 0);
    ck_assert_int_eq(open_rc(name, NULL, 0), SRL_ECORRUPT);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_header_whose_geometry_disagrees_with_its_policy_is_corrupt)
{
    srl_config cfg = config(10, 1000);
    /* One edit per fresh segment: a header word at off set to value. */
    static const struct {
        size_t off, width;
        uint64_t value;
    } edits[] = {
        /* More buckets than the file holds. */
        {offsetof(struct srl__shm_header, buckets), 8, 1u << 20},
        {offsetof(struct srl__shm_header, slot_bytes), 4, 8},
        {offsetof(struct srl__shm_header, limits.limit[0].permits), 4, 0},   /* invalid policy */
        {offsetof(struct srl__shm_header, state), 4, 77},
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        const char *name = make_segment(&cfg);
        if (edits[e].width == 8)
            shm_poke64(name, edits[e].off, edits[e].value);
        else
            shm_poke32(name, edits[e].off, (uint32_t)edits[e].value);
        int rc = open_rc(name, NULL, 0);
        ck_assert_msg(rc == SRL_ECORRUPT, "edit at %zu: rc %d, want SRL_ECORRUPT", edits[e].off,
                      rc);
        ck_assert_int_eq(srl_unlink(name), 0);
    }
}
END_TEST

START_TEST(another_policy_capacity_or_display_is_a_mismatch)
{
    srl_config cfg = config(10, 100);
    const char *name = make_segment(&cfg);
    srl_config other = cfg;
    other.policy.permits = 11;
    ck_assert_int_eq(open_rc(name, &other, SRL_CREATE), SRL_EMISMATCH);
    other = cfg;
    other.policy.algorithm = SRL_GCRA;
    ck_assert_int_eq(open_rc(name, &other, 0), SRL_EMISMATCH);
    other = cfg;
    other.policy.window_ns = 61 * SEC;
    ck_assert_int_eq(open_rc(name, &other, 0), SRL_EMISMATCH);
    other = cfg;
    other.capacity = 1000;
    ck_assert_int_eq(open_rc(name, &other, SRL_CREATE), SRL_EMISMATCH);
    other = cfg;
    other.key_display = 16;
    ck_assert_int_eq(open_rc(name, &other, 0), SRL_EMISMATCH);
    /* Capacity is kept in whole buckets: 100 and 112 are the same table. */
    other = cfg;
    other.capacity = 112;
    ck_assert_int_eq(open_rc(name, &other, 0), 0);
    /* on_full, ticker and timeout belong to the handle, not the segment. */
    other = cfg;
    other.on_full = SRL_ON_FULL_DENY;
    other.lock_timeout_ms = 5;
    ck_assert_int_eq(open_rc(name, &other, 0), 0);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* srl_mismatch_explain names each difference the open refused, both sides
 * and the fix, and nothing when the config would be accepted. */
START_TEST(a_mismatch_is_explained_field_by_field)
{
    srl_config cfg = config(100, 1000);
    const char *name = make_segment(&cfg);
    srl_limiter *seg;
    ck_assert_int_eq(srl_open_shared(name, NULL, SRL_ADOPT, &seg), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(seg, &info), 0);
    srl_close(seg);
    char why[1024];
    ck_assert_int_eq(srl_mismatch_explain(&cfg, &info, why, sizeof why), 0);
    ck_assert_str_eq(why, "");
    srl_config other = cfg;
    ck_assert_int_eq(srl_limits_parse_ex("gcra:100/1m + token_bucket:5000/1d", &other.limits, NULL),
                     0);
    other.capacity = 2000;
    other.key_display = 8;
    ck_assert_int_eq(open_rc(name, &other, 0), SRL_EMISMATCH);
    ck_assert_int_eq(srl_mismatch_explain(&other, &info, why, sizeof why), 3);
    ck_assert_str_eq(why,
        "policy: the segment has token_bucket:100/1m, this config asks for gcra:100/1m + "
        "token_bucket:5000/1d (use the segment's policy, or change it live, keeping each key's "
        "use: rlctl set-policy, or open with SRL_CHANGE; or another segment name, or destroy "
        "it: its keys start fresh); capacity: the segment holds 1008 slots, this config asks "
        "for 2000 keys (2000 slots in buckets of 16): ask for 1008, or make a new segment; "
        "key_display: the segment keeps 0 bytes per key, this config asks for 8 (it is part of "
        "the slot size: use 0)");
    ck_assert_int_eq(srl_mismatch_explain(&other, &info, why, 40), SRL_ENOBUFS);
    ck_assert_uint_eq(strlen(why), 39);
    ck_assert_int_eq(srl_mismatch_explain(NULL, &info, why, sizeof why), SRL_EINVAL);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(opening_without_a_config_adopts_the_segments_policy)
{
    srl_config cfg = config(7, 40);
    cfg.policy.algorithm = SRL_SLIDING_COUNTER;
    cfg.key_display = 9;
    const char *name = make_segment(&cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_int_eq(info.policy.algorithm, SRL_SLIDING_COUNTER);
    ck_assert_uint_eq(info.policy.permits, 7);
    ck_assert_uint_eq(info.policy.window_ns, 60 * SEC);
    ck_assert_uint_eq(info.capacity, 48);
    ck_assert_uint_eq(info.buckets, 3);
    ck_assert_uint_eq(info.key_display, 9);
    ck_assert_uint_eq(info.mode, 0600);
    ck_assert_uint_eq(info.owner_uid, geteuid());
    ck_assert_str_eq(info.name, name);
    struct stat st;
    ck_assert_int_eq(stat(path_of(name), &st), 0);
    ck_assert_uint_eq(info.segment_bytes, (uint64_t)st.st_size);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* No display copy: a 72-byte slot (fp 16 + meta 8 + state 24 + counters 8
 * + operator record 16, no key_len) and a 128-byte head + undo copy per 16
 * slots = 80 bytes per slot (layout 9; 64 in layouts 4 to 8, 56 in 3), and
 * the operator area once per segment. */
START_TEST(a_token_bucket_slot_without_key_display_costs_exactly_80_segment_bytes)
{
    srl_config cfg = config(100, 65536);
    ck_assert_uint_eq(cfg.key_display, 0);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_anonymous(&cfg, &lim), 0);
    srl_info info;
    ck_assert_int_eq(srl_info_get(lim, &info), 0);
    ck_assert_uint_eq(info.capacity, 65536);
    ck_assert_uint_eq(info.slot_bytes, 72);
    ck_assert_uint_eq(info.segment_bytes - SRL__SHM_HEADER_BYTES - SRL__SHM_OP_BYTES,
                      80 * info.capacity);
    srl_close(lim);
}
END_TEST

/* ------------------------------------------------------- not ours */

START_TEST(random_bytes_at_the_name_are_foreign)
{
    srl_config cfg = config(10, 100);
    const char *name = unique_name("random");
    unsigned char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 131 + 7);
    plant_file(name, junk, sizeof junk);
    assert_refused_to_creator_and_adopter(name, &cfg, SRL_EFOREIGN);
    /* A short file that is not empty: never one of ours either. */
    ck_assert_int_eq(truncate(path_of(name), 100), 0);
    ck_assert_int_eq(open_rc(name, NULL, 0), SRL_EFOREIGN);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(an_empty_file_at_the_name_is_stale_after_the_bounded_wait)
{
    srl_config cfg = config(10, 100);
    const char *name = unique_name("empty");
    plant_file(name, "", 0);
    ck_assert_int_eq(open_rc(name, &cfg, SRL_CREATE), SRL_ESTALE);
    struct stat st;
    ck_assert_int_eq(stat(path_of(name), &st), 0);   /* left for the operator */
    ck_assert_int_eq(st.st_size, 0);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* What process pid has open under /dev/shm: 1 if the directory itself (a
 * creator waiting for the creators' lock), 2 if a file there (a segment
 * being built: an unnamed one reads "/dev/shm/#123 (deleted)"), 3 both. */
static int shm_fds(pid_t pid)
{
    char dir[64], fn[400], target[400];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        snprintf(fn, sizeof fn, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(fn, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, "/dev/shm") == 0)
            seen |= 1;
        else if (strncmp(target, "/dev/shm/", 9) == 0)
            seen |= 2;
    }
    closedir(d);
    return seen;
}

/* A creator parked with its segment reserved and not yet named (the
 * SRL__SHM_PARK_BUILT hook: descheduled mid-build, as on a loaded machine)
 * shows nothing at the name, so no opener can misjudge it; a second
 * creator of the name waits on the creators' lock instead of reserving a
 * segment of its own, and once the first has named its segment, opens it. */
START_TEST(a_creator_mid_build_shows_nothing_and_a_second_creator_waits_for_it)
{
    srl_config cfg = config(10, 100);
    char name[128];
    strcpy(name, unique_name("slow"));
    int go, res[2];
    uint64_t ino;
    pid_t first = fork_parked_creator(name, &cfg, &go, &ino);
    ck_assert_int_eq(pipe(res), 0);
    assert_no_file(name);
    pid_t second = test_fork();
    if (second == 0) {
        srl_limiter *lim;
        int32_t out[2] = {srl_open_shared(name, &cfg, SRL_CREATE, &lim), 0};
        if (out[0] == 0) {
            srl_info info;
            srl_info_get(lim, &info);
            out[1] = info.creator_pid;
            srl_close(lim);
        }
        _exit(write(res[1], out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    /* Arranged, not slept for: the second has reached the lock (or, were
     * there none, its own unnamed file). */
    uint64_t t0 = srl_monotonic_ns(NULL);
    int seen;
    struct stat st;
    while ((seen = shm_fds(second)) == 0 && stat(path_of(name), &st) != 0) {
        ck_assert_msg(srl_monotonic_ns(NULL) - t0 < 30ull * 1000000000ull,
                      "the second creator never reached /dev/shm");
        sched_yield();
    }
    ck_assert_msg(seen == 1, "the second creator reserved or made a segment of its own (fds %d)",
                  seen);
    assert_no_file(name);
    ck_assert_int_eq(write(go, "g", 1), 1);
    int32_t out[2];
    ck_assert_int_eq(read(res[0], out, sizeof out), (ssize_t)sizeof out);
    assert_child_ok(first);
    assert_child_ok(second);
    ck_assert_int_eq(out[0], 0);
    ck_assert_int_eq(out[1], first);           /* the first one's segment */
    close(go);
    close(res[0]);
    close(res[1]);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* A creator descheduled before its segment has a name, that did not have
 * the creators' lock (here: it built its segment without it, then waits
 * until someone else has made the name) cannot leave the name empty or
 * half made for others to misjudge: the later creator takes the name, the
 * earlier one's link fails and it opens the later one's segment, and with
 * SRL_EXCL it is told SRL_EEXIST.  Nothing of the loser stays in /dev/shm
 * (its file never had a name). */
START_TEST(a_creator_that_loses_the_name_while_descheduled_opens_the_winners_segment)
{
    srl_config cfg = config(10, 100);
    char name[128];
    strcpy(name, unique_name("slow"));
    for (int excl = 0; excl <= 1; excl++) {
        int pipefd[2];
        ck_assert_int_eq(pipe(pipefd), 0);
        pid_t pid = test_fork();
        if (pid == 0) {
            close(pipefd[0]);
            srl_limiter *lim;
            int rc = srl__shm_open_test(name, &cfg, SRL_CREATE | (excl ? SRL_EXCL : 0),
                                        SRL__SHM_TEST_SLOW_LINK, &lim);
            int32_t creator = 0;
            if (rc == 0) {
                srl_info info;
                srl_info_get(lim, &info);
                creator = (int32_t)info.creator_pid;
                srl_decision d;
                if (srl_acquire(lim, "k", 1, 1, &d) != 0 || !d.allowed)
                    rc = 99;
                srl_close(lim);
            }
            int32_t out[2] = {rc, creator};
            _exit(write(pipefd[1], out, sizeof out) == sizeof out ? 0 : 1);
        }
        close(pipefd[1]);
        srl_limiter *lim;
        ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE | SRL_EXCL, &lim), 0);
        int32_t out[2];
        ck_assert_int_eq(read(pipefd[0], out, sizeof out), sizeof out);
        close(pipefd[0]);
        assert_child_ok(pid);
        srl_stats st;
        ck_assert_int_eq(srl_stats_get(lim, &st), 0);
        if (excl) {
            ck_assert_int_eq(out[0], SRL_EEXIST);
            ck_assert_uint_eq(st.allowed, 0);
        } else {
            ck_assert_int_eq(out[0], 0);
            ck_assert_int_eq(out[1], getpid());   /* ours: the winner's segment */
            ck_assert_uint_eq(st.allowed, 1);     /* its decision landed in it */
        }
        srl_close(lim);
        ck_assert_int_eq(srl_unlink(name), 0);
    }
}
END_TEST

START_TEST(a_creator_that_died_before_ready_leaves_a_stale_segment)
{
    srl_config cfg = config(10, 100);
    char name[128];
    strcpy(name, unique_name("stale"));
    /* The creator dies holding an INIT segment. */
    assert_child_ok(fork_creator(name, &cfg, SRL__SHM_TEST_NO_READY));
    assert_refused_to_creator_and_adopter(name, &cfg, SRL_ESTALE);
    /* The remedy works: unlink, and the next create starts afresh. */
    ck_assert_int_eq(srl_unlink(name), 0);
    ck_assert_int_eq(open_rc(name, &cfg, SRL_CREATE | SRL_EXCL), 0);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_live_creator_that_never_finishes_times_out)
{
    srl_config cfg = config(10, 100);
    char name[128];
    strcpy(name, unique_name("slow"));
    srl_limiter *creator = unfinished_creator(name, &cfg);
    ck_assert_int_eq(open_rc(name, &cfg, SRL_CREATE), SRL_ETIMEDOUT);
    srl_close(creator);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* 1 if process pid has path mapped (per /proc/pid/maps). */
static int maps_path(pid_t pid, const char *path)
{
    char fn[64], line[1024];
    snprintf(fn, sizeof fn, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(fn, "r");
    if (f == NULL)
        return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, path) != NULL;
    fclose(f);
    return found;
}

START_TEST(a_waiter_whose_creator_fails_starts_over_and_creates_it_itself)
{
    srl_config cfg = config(10, 100);
    char name[128];
    strcpy(name, unique_name("failed"));
    srl_limiter *creator = unfinished_creator(name, &cfg);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = test_fork();
    if (pid == 0) {
        /* Waits on the unfinished segment (its creator is alive). */
        srl_limiter *lim;
        int32_t res[2] = {srl_open_shared(name, &cfg, SRL_CREATE, &lim), 0};
        if (res[0] == 0) {
            srl_info info;
            srl_info_get(lim, &info);
            res[1] = info.creator_pid;
        }
        _exit(write(fds[1], res, sizeof res) == (ssize_t)sizeof res ? 0 : 1);
    }
    /* Arranged, not slept for: the child is waiting once it has mapped the
     * unfinished header (wait_ready maps it, then polls its state). */
    uint64_t t0 = srl_monotonic_ns(NULL);
    while (!maps_path(pid, path_of(name))) {
        ck_assert_msg(srl_monotonic_ns(NULL) - t0 < 30ull * 1000000000ull,
                      "the waiter never mapped %s", path_of(name));
        sched_yield();
    }
    /* What a failing creator does: mark FAILED, unlink. */
    int fd = open(path_of(name), O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint32_t failed = SRL__SHM_FAILED;
    ck_assert_int_eq(pwrite(fd, &failed, 4, offsetof(struct srl__shm_header, state)), 4);
    close(fd);
    ck_assert_int_eq(srl_unlink(name), 0);
    int32_t res[2];
    ck_assert_int_eq(read(fds[0], res, sizeof res), (ssize_t)sizeof res);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(res[0], 0);          /* not SRL_ETIMEDOUT */
    ck_assert_int_eq(res[1], pid);        /* it created the new one */
    srl_close(creator);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_failed_segment_left_at_the_name_is_stale)
{
    srl_config cfg = config(10, 100);
    const char *name = make_segment(&cfg);
    shm_poke32(name, offsetof(struct srl__shm_header, state), SRL__SHM_FAILED);
    assert_refused_to_creator_and_adopter(name, &cfg, SRL_ESTALE);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------- permissions */

static mode_t mode_of(const char *name)
{
    struct stat st;
    ck_assert_int_eq(stat(path_of(name), &st), 0);
    return st.st_mode & 0777;
}

START_TEST(a_new_segment_is_0600_whatever_the_umask)
{
    srl_config cfg = config(10, 100);
    umask(0);
    const char *name = make_segment(&cfg);
    ck_assert_uint_eq(mode_of(name), 0600);
    ck_assert_int_eq(srl_unlink(name), 0);
    umask(0077);
    cfg.mode = 0640;
    name = make_segment(&cfg);
    ck_assert_uint_eq(mode_of(name), 0640);                 /* fchmod: umask aside */
    ck_assert_int_eq(open_rc(name, NULL, 0), 0);            /* group read is fine */
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_group_writable_segment_is_refused_unless_the_opener_asked_for_it)
{
    srl_config cfg = config(10, 100);
    cfg.mode = 0660;
    const char *name = make_segment(&cfg);
    ck_assert_uint_eq(mode_of(name), 0660);
    srl_config strict = cfg;
    strict.mode = 0600;
    ck_assert_int_eq(open_rc(name, &strict, 0), SRL_EACCES);
    /* Without a config the bar is 0600: the creator's recorded mode is
     * the segment's word, not the opener's. */
    ck_assert_int_eq(open_rc(name, NULL, 0), SRL_EACCES);
    ck_assert_int_eq(open_rc(name, &cfg, 0), 0);
    ck_assert_int_eq(open_rc(name, &cfg, SRL_ADOPT), 0);
    /* Someone widening the segment to world-writable: refused by all. */
    ck_assert_int_eq(chmod(path_of(name), 0666), 0);
    ck_assert_int_eq(open_rc(name, &cfg, 0), SRL_EACCES);
    ck_assert_int_eq(open_rc(name, NULL, 0), SRL_EACCES);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_segment_owned_by_another_user_is_refused)
{
    /* Needs root to hand the file to other users (the suite runs as root). */
    ck_assert_int_eq(geteuid(), 0);
    srl_config cfg = config(10, 100);
    cfg.mode = 0666;                        /* the mode check alone would pass */
    const char *name = make_segment(&cfg);
    ck_assert_int_eq(chown(path_of(name), 65533, 65533), 0);
    assert_child_ok(fork_open_as_nobody(name, &cfg));       /* owner 65533, we are 65534 */
    /* A root-owned 0600 segment: the kernel already says no to others. */
    ck_assert_int_eq(chown(path_of(name), 0, 0), 0);
    ck_assert_int_eq(chmod(path_of(name), 0600), 0);
    pid_t pid = fork_open_as_nobody(name, NULL);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

/* ------------------------------------------------------- tmpfs full */

START_TEST(a_too_small_tmpfs_gives_enospc_at_creation_and_leaves_nothing)
{
    /* This test runs in its own forked process (Check fork mode): the mount
     * namespace dies with it. */
    ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
    ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    ck_assert_int_eq(mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m"), 0);
    srl_config cfg = config(10, 65536);                     /* 64 MiB */
    char name[128];
    strcpy(name, unique_name("enospc"));
    ck_assert_int_eq(open_rc(name, &cfg, SRL_CREATE), SRL_ENOSPC);
    assert_no_file(name);
    /* Four processes racing to create it: the creator fails, marks it
     * FAILED and unlinks it; the others start over and fail the same way
     * rather than waiting for a segment that will never be ready. */
    pid_t pids[4];
    for (int w = 0; w < 4; w++) {
        pids[w] = test_fork();
        if (pids[w] == 0)
            _exit(open_rc_quiet(name, &cfg, SRL_CREATE) == SRL_ENOSPC ? 0 : 1);
    }
    for (int w = 0; w < 4; w++)
        assert_child_ok(pids[w]);
    assert_no_file(name);
    /* What fits still works there. */
    cfg.capacity = 160;
    ck_assert_int_eq(open_rc(name, &cfg, SRL_CREATE), 0);
    ck_assert_int_eq(srl_unlink(name), 0);
    umount("/dev/shm");
}
END_TEST

/* ------------------------------------------------------- bad input */

START_TEST(bad_names_and_flags_are_einval_and_create_nothing)
{
    srl_config cfg = config(10, 100);
    char longname[260];
    memset(longname, 'a', 201);
    longname[201] = '\0';
    const char *bad[] = {"", "/", "a/b", "/..", ".", "sp ace", "new\nline", longname, "//x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(open_rc(bad[i], &cfg, SRL_CREATE), SRL_EINVAL);
        ck_assert_int_eq(srl_unlink(bad[i]), SRL_EINVAL);
    }
    ck_assert_int_eq(open_rc(NULL, &cfg, SRL_CREATE), SRL_EINVAL);
    longname[200] = '\0';                                  /* 200 is the limit */
    char name[260] = "/";
    strcat(name, longname);
    ck_assert_int_eq(srl_unlink(name), SRL_ENOENT);
    const char *ok = unique_name("flags");
    ck_assert_int_eq(open_rc(ok, &cfg, SRL_EXCL), SRL_EINVAL);      /* EXCL without CREATE */
    ck_assert_int_eq(open_rc(ok, &cfg, 0x80), SRL_EINVAL);
    ck_assert_int_eq(open_rc(ok, NULL, SRL_CREATE), SRL_EINVAL);    /* create needs a config */
    ck_assert_int_eq(open_rc(ok, &cfg, 0), SRL_ENOENT);
    srl_config bad_cfg = cfg;
    bad_cfg.policy.permits = 0;
    ck_assert_int_eq(open_rc(ok, &bad_cfg, SRL_CREATE), SRL_EPOLICY);
    bad_cfg = cfg;
    bad_cfg.capacity = 0;
    ck_assert_int_eq(open_rc(ok, &bad_cfg, SRL_CREATE), SRL_EINVAL);
    bad_cfg = cfg;
    bad_cfg.mode = 01777;
    ck_assert_int_eq(open_rc(ok, &bad_cfg, SRL_CREATE), SRL_EINVAL);
    struct stat st;
    ck_assert_int_eq(stat(path_of(ok), &st), -1);            /* nothing created */
    ck_assert_int_eq(srl_unlink(ok), SRL_ENOENT);
    /* Leading slash optional. */
    ck_assert_int_eq(open_rc(ok + 1, &cfg, SRL_CREATE | SRL_EXCL), 0);
    ck_assert_int_eq(open_rc(ok, &cfg, SRL_CREATE | SRL_EXCL), SRL_EEXIST);
    ck_assert_int_eq(srl_unlink(ok + 1), 0);
}
END_TEST

START_TEST(empty_and_too_long_keys_are_ekey_and_change_nothing)
{
    srl_config cfg = config(10, 100);
    const char *name = make_segment(&cfg);
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), 0);
    static char big[SRL_KEY_MAX + 2];
    memset(big, 'k', sizeof big);
    srl_decision d;
    memset(&d, 0x5a, sizeof d);
    srl_decision untouched = d;
    ck_assert_int_eq(srl_acquire(lim, big, SRL_KEY_MAX + 1, 1, &d), SRL_EKEY);
    ck_assert_int_eq(srl_acquire(lim, "", 0, 1, &d), SRL_EKEY);
    ck_assert_int_eq(srl_peek(lim, big, SRL_KEY_MAX + 1, 1, &d), SRL_EKEY);
    ck_assert_int_eq(srl_reset_key(lim, "", 0), SRL_EKEY);
    ck_assert_int_eq(memcmp(&d, &untouched, sizeof d), 0);
    /* A shared segment checks the cost under the key's lock (its policy
     * may change): the sentence names the policy current there. */
    char why[256];
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 11, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 11: 'token_bucket:10/1m' allows 10 at most");
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 0, &d), SRL_ECOST);
    srl_last_error(why, sizeof why);
    ck_assert_str_eq(why, "cost 0: a request costs 1 or more");
    /* The longest key is fine. */
    ck_assert_int_eq(srl_acquire(lim, big, SRL_KEY_MAX, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.used, 1);
    ck_assert_uint_eq(st.allowed + st.denied, 1);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), 0);
}
END_TEST

START_TEST(a_closed_segment_keeps_its_states_for_the_next_opener)
{
    fake_clock *c = fake_clock_shared(0);
    srl_config cfg = config(3, 100);
    cfg.ticker = fake_ticker(c);
    const char *name = make_segment(&cfg);
    srl_limiter *lim;
    srl_decision d;
    ck_assert_int_eq(srl_open_shared(name, &cfg, 0, &lim), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 2, &d), 0);
    srl_close(lim);
    ck_assert_int_eq(srl_open_shared(name, &cfg, SRL_CREATE, &lim), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_uint_eq(d.remaining, 0);
    /* Unlinked while open: this handle keeps working. */
    ck_assert_int_eq(srl_unlink(name), 0);
    ck_assert_int_eq(srl_acquire(lim, "k", 1, 1, &d), 0);
    ck_assert_int_eq(d.allowed, 0);
    srl_close(lim);
    ck_assert_int_eq(srl_unlink(name), SRL_ENOENT);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_segment");
    TCase *tc = tcase_create("segment");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, eight_processes_opening_a_new_name_at_once_make_one_segment);
    tcase_add_test(tc, a_segment_with_another_magic_is_foreign);
    tcase_add_test(tc, a_segment_of_another_layout_version_or_abi_is_refused);
    tcase_add_test(tc, a_truncated_segment_is_corrupt);
    tcase_add_test(tc, a_header_whose_geometry_disagrees_with_its_policy_is_corrupt);
    tcase_add_test(tc, another_policy_capacity_or_display_is_a_mismatch);
    tcase_add_test(tc, opening_without_a_config_adopts_the_segments_policy);
    tcase_add_test(tc, a_token_bucket_slot_without_key_display_costs_exactly_80_segment_bytes);
    tcase_add_test(tc, random_bytes_at_the_name_are_foreign);
    tcase_add_test(tc, an_empty_file_at_the_name_is_stale_after_the_bounded_wait);
    tcase_add_test(tc, a_creator_mid_build_shows_nothing_and_a_second_creator_waits_for_it);
    tcase_add_test(tc, a_creator_that_loses_the_name_while_descheduled_opens_the_winners_segment);
    tcase_add_test(tc, a_creator_that_died_before_ready_leaves_a_stale_segment);
    tcase_add_test(tc, a_live_creator_that_never_finishes_times_out);
    tcase_add_test(tc, a_waiter_whose_creator_fails_starts_over_and_creates_it_itself);
    tcase_add_test(tc, a_failed_segment_left_at_the_name_is_stale);
    tcase_add_test(tc, a_new_segment_is_0600_whatever_the_umask);
    tcase_add_test(tc, a_group_writable_segment_is_refused_unless_the_opener_asked_for_it);
    tcase_add_test(tc, a_segment_owned_by_another_user_is_refused);
    tcase_add_test(tc, a_too_small_tmpfs_gives_enospc_at_creation_and_leaves_nothing);
    tcase_add_test(tc, bad_names_and_flags_are_einval_and_create_nothing);
    tcase_add_test(tc, empty_and_too_long_keys_are_ekey_and_change_nothing);
    tcase_add_test(tc, a_closed_segment_keeps_its_states_for_the_next_opener);
    tcase_add_test(tc, a_mismatch_is_explained_field_by_field);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    static const char *const tags[] = {"seg", "race", "random", "empty", "stale", "slow", "failed", "flags", "enospc"};
    shm_sweep_leftovers(tags, sizeof tags / sizeof tags[0]);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
