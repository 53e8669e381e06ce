/*
 * errdetail.h - the calling thread's detail of its last store error, the
 * sentence srl_last_error copies out (errdetail.c).  Thread-local: no lock,
 * no handle needed (an open that fails has none).  Setting it keeps errno.
 */
#ifndef SRL_ERRDETAIL_H
#define SRL_ERRDETAIL_H

#include <stddef.h>

#define SRL__ERR_DETAIL_MAX 256u

/* Clear the detail (a call begins). */
void srl__err_clear(void);
/* Set it, printf-style, truncated to SRL__ERR_DETAIL_MAX - 1 bytes,
 * non-printable bytes (from a peer) shown as '?'. */
void srl__err_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
