/*
 * rlctl_metrics.c - metrics: the segments as Prometheus text.
 *
 * Which segments: the NAMEs given, or with none every srl segment of
 * /dev/shm (ls's rules: foreign and forbidden objects only with --all).  A
 * segment that cannot be read still gets srl_segment_up 0 with its status,
 * so a scrape sees it go missing; rlctl then says why on stderr and exits
 * with the first failure's code after writing everything else.
 *
 * --output FILE is for node_exporter's textfile collector, which may read
 * the file at any moment: the text goes to a temporary file in FILE's
 * directory (".NAME.XXXXXX": the collector reads only *.prom), is synced,
 * made 0644 (the exporter usually runs as another user) and renamed over
 * FILE, so a reader sees the old file or the new one, never half of one.
 * On any failure the temporary file is removed and FILE is left as it was.
 */
#include "rlctl.h"

#include "metrics_fmt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put_file(void *ctx, const char *s, size_t n)
{
    fwrite(s, 1, n, (FILE *)ctx);
}

/* Write to a temporary sibling of path, then rename it over path. */
static int write_atomic(const char *path, const srl__metrics_seg *v, size_t n)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    if (*base == '\0') {
        fprintf(stderr, "rlctl: metrics: --output %s: names a directory, give a file\n", path);
        return EX_USAGE;
    }
    size_t len = dirlen + 1 + strlen(base) + 8;
    char *tmp = malloc(len);
    if (tmp == NULL) {
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    snprintf(tmp, len, "%.*s.%s.XXXXXX", (int)dirlen, path, base);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "rlctl: metrics: --output %s: cannot create a file beside it: %s\n",
                path, strerror(errno));
        free(tmp);
        return errno == EACCES || errno == EPERM ? EX_NOPERM : EX_CANTCREAT;
    }
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        close(fd);
    } else {
        srl__metrics_format(v, n, put_file, f);
        if (fflush(f) == 0 && !ferror(f) && fchmod(fd, 0644) == 0 && fsync(fd) == 0 &&
            fclose(f) == 0) {
            f = NULL;
            if (rename(tmp, path) == 0) {
                free(tmp);
                return EX_OK;
            }
        }
    }
    int e = errno;
    if (f != NULL)
        fclose(f);
    unlink(tmp);
    free(tmp);
    fprintf(stderr, "rlctl: metrics: --output %s: writing failed: %s; the file is unchanged\n",
            path, strerror(e));
    return EX_IOERR;
}

int rlctl_cmd_metrics(const rlctl_opts *o)
{
    struct rlctl_segs s = {0};
    int status = EX_OK;
    if (o->nnames > 0) {
        s.v = calloc((size_t)o->nnames, sizeof *s.v);
        if (s.v == NULL) {
            fputs("rlctl: out of memory\n", stderr);
            return EX_OSERR;
        }
        for (int i = 0; i < o->nnames; i++) {
            rlctl_probe(o, o->names[i], 2, &s.v[i]);
            if (s.v[i].open_rc != 0) {
                int code = rlctl_fail(o->names[i], s.v[i].open_rc);
                if (status == EX_OK)
                    status = code;
            }
        }
        s.n = (size_t)o->nnames;
    } else {
        int rc = rlctl_scan(o, 2, &s);
        if (rc != EX_OK)
            return rc;
    }
    srl__metrics_seg *v = calloc(s.n ? s.n : 1, sizeof *v);
    if (v == NULL) {
        free(s.v);
        fputs("rlctl: out of memory\n", stderr);
        return EX_OSERR;
    }
    for (size_t i = 0; i < s.n; i++) {
        const struct rlctl_seg *g = &s.v[i];
        v[i].ok = g->open_rc == 0;
        v[i].status = g->status;
        v[i].name = v[i].ok ? rlctl_seg_name(&g->info, g->name) : g->name;
        if (v[i].ok) {
            v[i].info = g->info;
            v[i].stats = g->stats;
            v[i].inflight_counted = g->inflight_counted;
            v[i].inflight = g->inflight;
            v[i].bans_counted = g->bans_counted;
            v[i].bans_hand = g->bans_hand;
            v[i].bans_penalty = g->bans_penalty;
        }
    }
    int wrc;
    if (o->output != NULL) {
        wrc = write_atomic(o->output, v, s.n);
    } else {
        srl__metrics_format(v, s.n, put_file, stdout);
        wrc = rlctl_flush(EX_OK);
    }
    free(v);
    free(s.v);
    return wrc != EX_OK ? wrc : status;
}
