/*
 * errdetail.c - srl_last_error and the thread-local sentence behind it
 * (errdetail.h).  Touches only this thread's buffer and the caller's.
 */
#include "errdetail.h"
#include "srl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char detail[SRL__ERR_DETAIL_MAX];

void srl__err_clear(void)
{
    detail[0] = '\0';
}

void srl__err_set(const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    for (char *p = detail; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = '?';   /* a peer's bytes go into logs and exceptions */
    errno = saved;
}

size_t srl_last_error(char *buf, size_t len)
{
    size_t n = strlen(detail);
    if (buf != NULL && len > 0) {
        size_t k = n < len - 1 ? n : len - 1;
        memcpy(buf, detail, k);
        buf[k] = '\0';
    }
    return n;
}
