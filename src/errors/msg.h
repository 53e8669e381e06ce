/*
 * msg.h - the library's one way to fill a caller's message buffer (internal).
 *
 * Calls that explain a refusal (srl_policy_change, srl_redis_uri_check, ...)
 * take (char *msg, size_t len); msg may be NULL or len 0 (no message wanted),
 * and a message longer than len is truncated, NUL-terminated.
 */
#ifndef SRL_MSG_H
#define SRL_MSG_H

#include <stddef.h>

/* Write the formatted sentence into msg (as above) and return rc, so that a
 * refusal is one statement: `return srl__say(msg, len, SRL_EPOLICY, "...")`. */
int srl__say(char *msg, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
