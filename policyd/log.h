/*
 * log.h - srl-policyd's log: syslog (mail facility), stderr or a file.
 */
#ifndef SRL_POLICYD_LOG_H
#define SRL_POLICYD_LOG_H

#include <syslog.h>

#include "conf.h"

/* Where pd_log writes from now on; 0, or -1 if the file cannot be opened. */
int pd_log_open(enum pd_log_to to, const char *file);
/* One line: "srl-policyd[PID]: warning: ..." (level LOG_WARNING, LOG_INFO, ...). */
void pd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
