/*
 * metrics_fmt.h - srl segments as Prometheus text (exposition format 0.0.4).
 *
 * One formatter, compiled into both rlctl (`rlctl metrics`) and mod_srl
 * (`SetHandler srl-metrics`), so the two print byte-identical series.  It
 * takes what the public API returns (srl_info + srl_stats per segment, and
 * the units in flight when the caller summed them: srl_inflight_units) and
 * writes through a callback, so it does no I/O of its own and allocates
 * nothing: rlctl passes fwrite, mod_srl ap_rwrite.
 *
 * Names use the srl__ prefix (internal to the srl project); nothing here is
 * part of libsrl's API.
 */
#ifndef SRL_METRICS_FMT_H
#define SRL_METRICS_FMT_H

#include <stddef.h>

#include "srl.h"

/* Content-Type of the text this writes. */
#define SRL__METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct srl__metrics_seg {
    const char *name;         /* segment name as shown (label value) */
    const char *status;       /* "ok", or why it could not be read ("stale", ...) */
    int ok;                   /* 1: info and stats below are valid */
    srl_info info;
    srl_stats stats;
    int inflight_counted;     /* 1: inflight below was summed (a walk of the
                                 keys, by the caller): srl_inflight_units */
    uint64_t inflight;        /* units of its concurrency limit held now */
    int bans_counted;         /* 1: the bans below were counted (a walk of the
                                 keys: srl__metrics_count_bans) */
    uint64_t bans_hand;       /* keys banned by hand now (srl_key_ban) */
    uint64_t bans_penalty;    /* keys in a ",penalty=" ban now (and no hand ban) */
} srl__metrics_seg;

typedef void (*srl__metrics_put)(void *ctx, const char *s, size_t n);

/* Count the keys of lim banned now, by kind, into g (bans_counted = 1 on
 * success): one srl_foreach, a bucket lock at a time, as long as a walk of
 * the segment takes (about 0.3 s a million keys).  Every printer of
 * srl_bans_active calls it, so rlctl, mod_srl and the nginx module print
 * the same series.  0 or srl_foreach's error (g's bans then not counted). */
int srl__metrics_count_bans(srl_limiter *lim, srl__metrics_seg *g);

/* Write every metric family (HELP, TYPE, one sample per segment) for
 * segs[0..n) through put. */
void srl__metrics_format(const srl__metrics_seg *segs, size_t n, srl__metrics_put put,
                         void *ctx);

/* One gauge family of the caller's own (mod_srl's srl_handle_*, which
 * describe its worker's handles, not a segment: rlctl has no such handle):
 * HELP, TYPE, then name{key="labels[i]"} values[i] for i < n, the label
 * values escaped as the segment series' are. */
void srl__metrics_gauge(srl__metrics_put put, void *ctx, const char *name, const char *help,
                        const char *key, const char *const *labels, const uint64_t *values,
                        size_t n);

#endif
