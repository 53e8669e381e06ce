/*
 * msg.c - srl__say: a refusal's sentence into the caller's buffer (msg.h).
 * Touches nothing but the buffer it is given.
 */
#include "msg.h"

#include <stdarg.h>
#include <stdio.h>

int srl__say(char *msg, size_t len, int rc, const char *fmt, ...)
{
    if (msg != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return rc;
}
