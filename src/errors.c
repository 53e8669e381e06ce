/* errors.c - srl_strerror: one sentence per SRL_E* code. */
#include "srl.h"

const char *srl_strerror(int code)
{
    switch (code) {
    case SRL_OK: return "success";
    case SRL_EINVAL: return "invalid argument";
    case SRL_EPOLICY: return "invalid rate-limit policy";
    case SRL_ECOST: return "cost is zero or exceeds the policy's permits";
    case SRL_EKEY: return "key is empty or longer than SRL_KEY_MAX bytes";
    case SRL_ENOMEM: return "out of memory";
    case SRL_ENOBUFS: return "output buffer too small";
    case SRL_ENOENT: return "no such segment or key";
    case SRL_EEXIST: return "segment already exists";
    case SRL_EMISMATCH: return "segment exists with a different policy or geometry";
    case SRL_EFOREIGN: return "not an srl segment";
    case SRL_EVERSION: return "srl segment of an incompatible layout version or ABI";
    case SRL_ECORRUPT: return "segment is corrupt (header or table inconsistent)";
    case SRL_ESTALE: return "segment is stale: its creator died before it was ready; unlink it (rlctl destroy)";
    case SRL_EACCES: return "permission denied (segment owner or mode refused)";
    case SRL_ENOSPC: return "no space left on the shared-memory filesystem";
    case SRL_ETIMEDOUT: return "timed out waiting for a lock or for the segment's creator";
    case SRL_ENOTRECOVERABLE: return "a bucket lock is not recoverable";
    case SRL_ENOTSUP: return "operation not supported by this limiter";
    case SRL_ESYS: return "system error (see errno)";
    default: return "unknown srl error";
    }
}
