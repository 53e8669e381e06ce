/*
 * shm_room.c - will a new segment fit: /dev/shm's free space, the memory
 * the kernel can give (MemAvailable and the caller's cgroups), and the size
 * guard above which a creator must say it means the size (srl.h, ROOM).
 *
 * Why memory and not only /dev/shm: tmpfs pages are RAM (no swap here, and
 * tmpfs's default size is half of RAM, so a segment that fits /dev/shm can
 * still take what every other process lives on; a creator's posix_fallocate
 * is then answered by the OOM killer, not by ENOSPC).  What the kernel can
 * give is the least of MemAvailable and, for every cgroup from the
 * caller's own up to the root (a parent's limit binds its children too),
 * limit minus usage, less a margin of 5 % of that least figure: page
 * cache and other processes' growth need room while the table is built.
 * A figure that cannot be read (no /proc, no cgroup mount) is not counted:
 * refusing every creation where /proc/meminfo is hidden would break more
 * than it saves, and the size guard still holds there.
 *
 * Reads only kernel files and statvfs, and writes only the caller's
 * message buffer; no lock, no state.  It knows sizes, not segments: the
 * caller (shm_segment.c, which also holds srl_room_check) brings the
 * bytes a segment needs, so this file calls nothing of the store.  The paths come through
 * SRL__ROOM_SRC (testhooks.h), which the test copy of the library can
 * redirect to fake files (tests/check_shm_room.c).
 */
#include "shm.h"
#include "msg.h"
#include "testhooks.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define NONE UINT64_MAX         /* a figure that is unknown, or no limit */
#define MARGIN_PERCENT 5u
/* cgroup v1 says "no limit" with the largest page-aligned long (2^63 - 4096
 * on 4 KiB pages): anything this large is no limit. */
#define CG1_UNLIMITED (1ull << 62)

static const struct srl__room_src real_src = {
    .meminfo = "/proc/meminfo",
    .proc_cgroup = "/proc/self/cgroup",
    .cgroup_root = "/sys/fs/cgroup",
    .shm_dir = "/dev/shm",
    .guard = SRL_SEGMENT_GUARD_BYTES,
};

/* A file's first line as a number: digits, or "max" (NONE).  0 if read. */
static int read_number(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[64];
    int rc = -1;
    if (fgets(line, sizeof line, f) != NULL) {
        char *end;
        if (strncmp(line, "max", 3) == 0 && (line[3] == '\n' || line[3] == '\0')) {
            *out = NONE;
            rc = 0;
        } else if (line[0] >= '0' && line[0] <= '9') {
            unsigned long long v = strtoull(line, &end, 10);
            if (*end == '\n' || *end == '\0') {
                *out = v;
                rc = 0;
            }
        }
    }
    fclose(f);
    return rc;
}

/* MemAvailable in bytes, or NONE. */
static uint64_t mem_available(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return NONE;
    char line[128];
    uint64_t v = NONE;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            v = kb > UINT64_MAX / 1024 ? NONE : (uint64_t)kb * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

/* The tightest cgroup under dir/<path> and its ancestors: limit - usage
 * over the files lim and use, folded into r (cg_free, cg_limit, cg_used). */
static void cgroup_walk(struct srl__room *r, const char *dir, const char *path, const char *lim,
                        const char *use, uint64_t unlimited)
{
    char p[512], file[600];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return;
    for (;;) {
        uint64_t limit, used;
        snprintf(file, sizeof file, "%s%s/%s", dir, p, lim);
        if (read_number(file, &limit) == 0 && limit != NONE && limit < unlimited) {
            snprintf(file, sizeof file, "%s%s/%s", dir, p, use);
            if (read_number(file, &used) != 0)
                used = 0;
            uint64_t left = used >= limit ? 0 : limit - used;
            if (r->cg_free == NONE || left < r->cg_free) {
                r->cg_free = left;
                r->cg_limit = limit;
                r->cg_used = used;
            }
        }
        char *slash = strrchr(p, '/');
        if (slash == NULL || p[0] == '\0')
            return;
        *slash = '\0';   /* "/a/b" -> "/a" -> "" (the root) */
    }
}

/* The caller's cgroups (/proc/self/cgroup): "0::PATH" is v2, a line whose
 * controller list names "memory" is v1's memory hierarchy. */
static void cgroups(struct srl__room *r, const struct srl__room_src *src)
{
    FILE *f = fopen(src->proc_cgroup, "re");
    if (f == NULL)
        return;
    char line[768], dir[300];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *ctl = strchr(line, ':');
        char *path = ctl != NULL ? strchr(ctl + 1, ':') : NULL;
        if (path == NULL)
            continue;
        *ctl++ = '\0';
        *path++ = '\0';
        if (path[0] != '/')
            continue;
        if (strcmp(line, "0") == 0 && ctl[0] == '\0') {
            snprintf(dir, sizeof dir, "%s", src->cgroup_root);
            cgroup_walk(r, dir, strcmp(path, "/") == 0 ? "" : path, "memory.max",
                        "memory.current", NONE);
            continue;
        }
        char *save = NULL;
        for (char *c = strtok_r(ctl, ",", &save); c != NULL; c = strtok_r(NULL, ",", &save))
            if (strcmp(c, "memory") == 0) {
                snprintf(dir, sizeof dir, "%s/memory", src->cgroup_root);
                cgroup_walk(r, dir, strcmp(path, "/") == 0 ? "" : path,
                            "memory.limit_in_bytes", "memory.usage_in_bytes", CG1_UNLIMITED);
            }
    }
    fclose(f);
}

void srl__room_read(struct srl__room *r, uint64_t need, int named)
{
    srl__room_read_from(r, need, named, SRL__ROOM_SRC(&real_src));
}

void srl__room_read_from(struct srl__room *r, uint64_t need, int named,
                         const struct srl__room_src *src)
{
    memset(r, 0, sizeof *r);
    r->need = need;
    r->guard = src->guard;
    r->shm_free = NONE;
    if (named) {
        struct statvfs v;
        if (statvfs(src->shm_dir, &v) == 0)
            r->shm_free = (uint64_t)v.f_bavail * v.f_frsize;
    }
    r->mem_available = mem_available(src->meminfo);
    r->cg_free = r->cg_limit = r->cg_used = NONE;
    cgroups(r, src);
    uint64_t least = r->mem_available < r->cg_free ? r->mem_available : r->cg_free;
    r->can_give = least == NONE ? NONE : least - least / 100 * MARGIN_PERCENT;
}

/* "22.4 GiB", "512 KiB", "100 bytes": one decimal, binary units. */
static const char *human(uint64_t v, char buf[32])
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (v < 1024) {
        snprintf(buf, 32, "%" PRIu64 " bytes", v);
        return buf;
    }
    int u = 0;
    double d = (double)v / 1024.0;
    while (d >= 1024.0 && u < 5) {
        d /= 1024.0;
        u++;
    }
    snprintf(buf, 32, "%.1f %s", d, unit[u]);
    return buf;
}

/* "cgroup limit none" or "cgroup limit 512.0 MiB, 100.0 MiB used". */
static const char *cgroup_text(const struct srl__room *r, char buf[96])
{
    char a[32], b[32];
    if (r->cg_free == NONE)
        snprintf(buf, 96, "cgroup limit none");
    else
        snprintf(buf, 96, "cgroup limit %s, %s used", human(r->cg_limit, a), human(r->cg_used, b));
    return buf;
}

int srl__room_verdict(const struct srl__room *r, uint64_t capacity, uint32_t cfg_flags, char *msg,
                      size_t len)
{
    char need[32], a[32], b[32], cg[96];
    human(r->need, need);
    if (r->shm_free != NONE && r->need > r->shm_free)
        return srl__say(msg, len, SRL_ENOSPC,
                        "the segment needs %s (capacity %" PRIu64 " keys); /dev/shm has %s free: "
                        "lower the capacity, or free space in /dev/shm (df /dev/shm, rlctl ls)",
                        need, capacity, human(r->shm_free, a));
    if (r->can_give != NONE && r->need > r->can_give)
        return srl__say(msg, len, SRL_ENOSPC,
                        "the segment needs %s (capacity %" PRIu64 " keys); the kernel can give "
                        "%s (MemAvailable %s, %s, margin %u%%): lower the capacity, or free "
                        "memory",
                        need, capacity, human(r->can_give, a),
                        r->mem_available == NONE ? "unknown" : human(r->mem_available, b),
                        cgroup_text(r, cg), MARGIN_PERCENT);
    if (r->need > r->guard && !(cfg_flags & SRL_CONFIG_FORCE))
        return srl__say(msg, len, SRL_ETOOBIG,
                        "the segment needs %s (capacity %" PRIu64 " keys), above the size guard "
                        "of %s: check the capacity (a typo such as 400M for 400k?), or pass "
                        "force (rlctl create --force, SRL_CONFIG_FORCE) if this size is meant",
                        need, capacity, human(r->guard, a));
    if (msg != NULL && len > 0)
        msg[0] = '\0';
    return 0;
}

int srl__room_check(const srl_config *cfg, uint64_t need, int named, char *msg, size_t len)
{
    struct srl__room r;
    srl__room_read(&r, need, named);
    return srl__room_verdict(&r, cfg->capacity, cfg->flags, msg, len);
}
