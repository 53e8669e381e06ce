/*
 * log.c - one line per event.  Under spawn(8) stdout is the Postfix
 * connection (and stderr may be too), so the default is syslog; stderr and
 * a file (O_APPEND, one write per line, so forked connection handlers do
 * not interleave inside a line) are for tests and foreground runs.
 */
#include "log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum pd_log_to log_to = PD_LOG_STDERR;
static int log_fd = 2;

int pd_log_open(enum pd_log_to to, const char *file)
{
    if (to == PD_LOG_FILE) {
        int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd < 0) return -1;
        if (log_fd > 2) close(log_fd);
        log_fd = fd;
    } else if (to == PD_LOG_SYSLOG) {
        openlog("srl-policyd", LOG_PID | LOG_NDELAY, LOG_MAIL);
    } else {
        log_fd = 2;
    }
    log_to = to;
    return 0;
}

void pd_log(int level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (log_to == PD_LOG_SYSLOG) {
        syslog(level, "%s", msg);
        return;
    }
    const char *lv = level <= LOG_ERR ? "error: " : level == LOG_WARNING ? "warning: " : "";
    char line[1200];
    int n = snprintf(line, sizeof line, "srl-policyd[%ld]: %s%s\n", (long)getpid(), lv, msg);
    if (n > 0) {
        if ((size_t)n > sizeof line - 1) n = (int)sizeof line - 1;
        ssize_t w = write(log_fd, line, (size_t)n);
        (void)w;
    }
}
