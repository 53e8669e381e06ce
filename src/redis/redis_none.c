/*
 * redis_none.c - srl_open_redis when the library was built without hiredis
 * (meson -Dredis=disabled, or hiredis not found): always SRL_ENOTSUP, so the
 * API is the same in every build.
 */
#include "limiter.h"

int srl_open_redis(const char *uri, const srl_config *cfg, srl_limiter **out)
{
    (void)uri;
    (void)cfg;
    if (out != NULL)
        *out = NULL;
    return SRL_ENOTSUP;
}
