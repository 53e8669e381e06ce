/*
 * fuzz_room.c - libFuzzer target: the room check's readers of
 * /proc/meminfo, /proc/self/cgroup and the cgroup files (src/shm/shm_room.c)
 * on arbitrary text, through srl__room_read_from and fake files.
 *
 * The input is split at NUL bytes: meminfo, then /proc/self/cgroup, then
 * the cgroup root's memory.max and memory.current (a v2 line "0::/" makes
 * the reader look there; a v1 "N:memory:/" line, at memory/ under it, which
 * has the same two texts as limit_in_bytes and usage_in_bytes).  Missing
 * parts are empty files.  The segment's size is taken from the input's
 * length, so both verdicts are reached.
 *
 * Invariants checked (abort on violation):
 *   - can_give is unknown exactly when MemAvailable and every cgroup are,
 *     and never above either known figure;
 *   - a cgroup's free figure never exceeds its limit;
 *   - the verdict is 0, SRL_ENOSPC or SRL_ETOOBIG, and its sentence is
 *     NUL-terminated inside the buffer, empty exactly on 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "shm.h"

static char dir[64];

static void put(const char *rel, const char *text, size_t n)
{
    char path[200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        abort();
    if (n > 0 && fwrite(text, 1, n, f) != n)
        abort();
    fclose(f);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (dir[0] == '\0') {
        strcpy(dir, "/tmp/srl-fuzz-room-XXXXXX");
        if (mkdtemp(dir) == NULL)
            abort();
        char sub[100];
        snprintf(sub, sizeof sub, "%s/cg", dir);
        mkdir(sub, 0700);
        snprintf(sub, sizeof sub, "%s/cg/memory", dir);
        mkdir(sub, 0700);
    }
    const char *names[] = {"meminfo", "cgroup", "cg/memory.max", "cg/memory.current"};
    const char *v1[] = {NULL, NULL, "cg/memory/memory.limit_in_bytes",
                        "cg/memory/memory.usage_in_bytes"};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        const unsigned char *end = at < size ? memchr(data + at, 0, size - at) : NULL;
        size_t n = at < size ? (end != NULL ? (size_t)(end - (data + at)) : size - at) : 0;
        put(names[i], (const char *)data + at, n);
        if (v1[i] != NULL)
            put(v1[i], (const char *)data + at, n);
        at += n + 1;
    }
    char meminfo[100], cgroup[100], root[100];
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", dir);
    snprintf(cgroup, sizeof cgroup, "%s/cgroup", dir);
    snprintf(root, sizeof root, "%s/cg", dir);
    struct srl__room_src src = {meminfo, cgroup, root, dir, 1u << 20};
    struct srl__room r;
    srl__room_read_from(&r, (uint64_t)size << 12, 0, &src);
    uint64_t least = r.mem_available < r.cg_free ? r.mem_available : r.cg_free;
    if ((r.can_give == UINT64_MAX) != (least == UINT64_MAX) || r.can_give > least)
        abort();
    if (r.cg_free != UINT64_MAX && r.cg_free > r.cg_limit)
        abort();
    char msg[512];
    memset(msg, 'x', sizeof msg);
    int rc = srl__room_verdict(&r, size, (uint32_t)(size & 1) * SRL_CONFIG_FORCE, msg, sizeof msg);
    if (rc != 0 && rc != SRL_ENOSPC && rc != SRL_ETOOBIG)
        abort();
    if (memchr(msg, 0, sizeof msg) == NULL || (rc == 0) != (msg[0] == '\0'))
        abort();
    return 0;
}
