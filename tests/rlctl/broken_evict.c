/*
 * broken_evict.c - a DELIBERATELY BROKEN `rlctl evict`, built only for the
 * tests (rlctl-broken-evict), to show that check_rlctl_race catches an
 * evict that loses live states.
 *
 * The bug it stands for: an evictor that drops keys without deciding "at
 * rest" under the key's lock.  It walks the keys (srl_foreach), then resets
 * every key whose full bytes the display copy holds, at rest or not, and
 * reports only the at-rest ones, exactly as the real evict would word it.
 * A key reset while its permits are spent starts fresh, so the workers get
 * more than the limit: the race suite must fail against this binary.
 *
 * Same interface and output as tools/rlctl_evict.c; nothing else differs.
 */
#include "rlctl.h"

#include <stdlib.h>
#include <string.h>

struct victims {
    unsigned char (*key)[SRL_KEY_DISPLAY_MAX];
    uint32_t *len;
    size_t n, cap;
    uint64_t at_rest;
    int oom;
};

static int collect(const srl_entry *e, void *ctx)
{
    struct victims *v = ctx;
    v->at_rest += e->at_rest != 0;
    if (e->display_len == 0 || e->display_len < e->key_len)
        return 0;
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        void *k = realloc(v->key, cap * sizeof *v->key);
        if (k == NULL) {
            v->oom = 1;
            return 1;
        }
        v->key = k;
        void *l = realloc(v->len, cap * sizeof *v->len);
        if (l == NULL) {
            v->oom = 1;
            return 1;
        }
        v->len = l;
        v->cap = cap;
    }
    memcpy(v->key[v->n], e->display, e->display_len);
    v->len[v->n++] = e->display_len;
    return 0;
}

int rlctl_cmd_evict(const rlctl_opts *o)
{
    srl_limiter *lim;
    int status = rlctl_open(o, &lim);
    if (status != 0)
        return status;
    struct victims v = {0};
    int64_t n = srl_foreach(lim, collect, &v);
    if (n >= 0 && !o->dry_run)
        for (size_t i = 0; i < v.n; i++)
            (void)srl_reset_key(lim, v.key[i], v.len[i]); /* the bug */
    srl_close(lim);
    free(v.key);
    free(v.len);
    if (n < 0)
        return rlctl_fail_cmd(o, (int)n);
    if (o->json) {
        rlctl_json j;
        rlctl_json_init(&j, stdout);
        rlctl_json_begin_obj(&j, NULL);
        rlctl_json_str(&j, "name", o->name);
        rlctl_json_bool(&j, "dry_run", o->dry_run);
        if (o->dry_run) {
            rlctl_json_u64(&j, "at_rest", v.at_rest);
            rlctl_json_i64(&j, "tracked", n);
        } else {
            rlctl_json_u64(&j, "evicted", v.at_rest);
        }
        rlctl_json_end_obj(&j);
        rlctl_json_end(&j);
    } else if (o->dry_run) {
        printf("%s: %" PRIu64 " of %" PRId64 " keys at rest would be evicted (dry run: nothing "
               "evicted)\n",
               o->name, v.at_rest, n);
    } else {
        printf("%s: evicted %" PRIu64 " keys at rest\n", o->name, v.at_rest);
    }
    return rlctl_flush(EX_OK);
}
