/*
 * errors.c - srl_strerror and srl_err_name, both generated from
 * SRL_ERRNO_MAP in srl.h, so a code added there is named here with no
 * second list to keep in step.
 */
#include "srl.h"

#include <stddef.h>

const char *srl_strerror(int code)
{
    switch (code) {
#define SRL__ERRNO_MSG(name, value, msg) \
    case SRL_##name: return msg;
    SRL_ERRNO_MAP(SRL__ERRNO_MSG)
#undef SRL__ERRNO_MSG
    default: return "unknown srl error";
    }
}

const char *srl_err_name(int code)
{
    switch (code) {
#define SRL__ERRNO_NAME(name, value, msg) \
    case SRL_##name: return "SRL_" #name;
    SRL_ERRNO_MAP(SRL__ERRNO_NAME)
#undef SRL__ERRNO_NAME
    default: return NULL;
    }
}
