/*
 * serve.c - the per-connection loop.  Any reader fault (over-long line, too
 * many attributes, NUL or non-UTF-8 byte, a line without '=', no empty line
 * in time, the peer closing mid-request) is logged with the reader's words
 * and answered with default_action, then the connection is closed: after a
 * framing fault the next byte's meaning is unknown, and Postfix reconnects
 * for its next request.  A clean close between requests ends it silently.
 */
#include "serve.h"

#include <sys/socket.h>
#include <time.h>

#include "decide.h"
#include "log.h"
#include "proto.h"

/* After a fault's answer: end our side, then read and drop what the peer
 * still sends (bounded: 1 MiB and 2 s in all), so closing with unread input does not
 * make the kernel reset the connection and throw the answer away. */
static void drain(int in, int out)
{
    char sink[4096];
    size_t total = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    shutdown(out, SHUT_WR);
    while (total < (1u << 20)) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = 2000 - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0) break;
        ssize_t n = pd_fill_fd(&in, sink, sizeof sink, (int)left);
        if (n <= 0) break;
        total += (size_t)n;
    }
}

long pd_serve(pd_conf *c, int in, int out, const char *peer)
{
    pd_reader r;
    long answered = 0;
    if (pd_reader_init(&r, pd_fill_fd, &in, c->max_line, c->max_attributes,
                       (int)(c->idle_timeout_s * 1000u), (int)(c->request_timeout_s * 1000u)) != 0) {
        pd_log(LOG_ERR, "%s: out of memory", peer);
        return 0;
    }
    for (;;) {
        char why[512], action[PD_ACTION_MAX + 128];
        int st = pd_read_request(&r, why, sizeof why);
        if (st == PD_EOF) break;
        if (st == PD_IDLE) {
            pd_log(LOG_INFO, "%s: %s; closing", peer, why);
            break;
        }
        if (st != PD_OK) {
            pd_log(LOG_WARNING, "%s: bad request: %s; answering %s and closing", peer, why,
                   c->default_action);
            if (pd_write_action(out, c->default_action) == 0) answered++;
            if (st != PD_TIMEOUT && st != PD_TRUNCATED && st != PD_IO) drain(in, out);
            break;
        }
        int o = pd_decide(c, &r, action, sizeof action, why, sizeof why);
        if (why[0] != '\0')
            pd_log(o == PD_PASS || o == PD_DEFER ? LOG_INFO : LOG_WARNING, "%s: %s", peer, why);
        if (pd_write_action(out, action) != 0) {
            pd_log(LOG_WARNING, "%s: cannot write the answer; closing", peer);
            break;
        }
        answered++;
    }
    pd_reader_free(&r);
    return answered;
}
