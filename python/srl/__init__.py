"""srl - a host-wide rate limiter for pre-forked servers (Python binding).

One limiter shared by every worker process of the host: gunicorn's sync
workers, uWSGI's processes, PHP-FPM and Apache can all count against the same
segment /dev/shm/NAME, so N per window means N host-wide, not N per worker.

    import srl
    lim = srl.Limiter.shared("myapp", "gcra:100/1m")
    # or, one limit across hosts: srl.Limiter.redis("redis://10.0.0.5:6379?prefix=myapp",
    #   "gcra:100/1m"), or srl.Limiter.fronted("myapp", URI, "gcra:100/1m") with the host
    #   segment in front
    d = lim.acquire(user_id)            # str (UTF-8) or bytes
    if not d:
        status = 429
    extra = srl.headers(d)              # RateLimit-Policy, RateLimit, Retry-After

The C extension srl._srl wraps include/srl.h; this file defines the error
classes, one per SRL_E* code, all subclasses of srl.Error, which carries
.code (negative int), .name ("SRL_EPOLICY") and .message.  Decisions,
limiter kinds and the header values are exactly those of the C library.

Client addresses: srl.ip_key(addr, v4=32, v6=64) is the key of an address's
prefix ("192.0.2.1/32", "2001:db8:1:2::/64"; ::ffff:a.b.c.d counts as IPv4),
srl.cidr(text) a range in canonical form, srl.cidr_match(range, addr) whether
the address is in it (srl_key_ip, srl_cidr_*: the bytes every binding makes).
Limiter.exempt(key, on=True) exempts a key (srl_key_exempt).

The openers' dry_run=, lockfree= and flood_cache= are asked for; what took
effect in the handle's store is in lim.info(): "flags" (srl_info.flags) and
the booleans "lockfree", "flood_cache" and "dry_run" (lockfree=True on a
token_bucket limiter, or flood_cache=True on local(), reads False).

A decision that starts a penalty= ban (FLAG_BAN_STARTED, one per ban) is
logged on the logger "srl" at srl.ban_log_level (default logging.WARNING;
None: not logged): "ban started: key K, policy P, until YYYY-MM-DDTHH:MM:SSZ"
(K with control characters and undecodable bytes escaped; until = now in UTC
plus the decision's retry_after, rounded up to the second).
"""
import datetime
import logging
import time

from . import _srl
from ._srl import (Decision, Limiter, headers, strerror, unlink, key_fit, FLAG_UNTRACKED,
                   FLAG_DEGRADED, FLAG_WOULD_DENY, FLAG_LOCAL, FLAG_BAN_STARTED, KEY_MAX)
from ._srl import ip_key, cidr, cidr_match

__all__ = ["Limiter", "Decision", "headers", "strerror", "unlink", "key_fit", "Error",
           "FLAG_UNTRACKED", "FLAG_DEGRADED", "FLAG_WOULD_DENY", "FLAG_LOCAL", "FLAG_BAN_STARTED",
           "KEY_MAX", "holding", "ban_log_level", "ip_key", "cidr", "cidr_match"]

ban_log_level = logging.WARNING


def _key_display(key):
    """A key as a log shows it: str as is, bytes as UTF-8; control characters and
    bytes that are not UTF-8 escaped (\\x1b, \\xff), so a client cannot forge lines."""
    if isinstance(key, (bytes, bytearray)):
        key = bytes(key).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 256
                   else "\\u%04x" % ord(c) for c in str(key))


def _log_ban(lim, key, policy, d):
    level = ban_log_level
    log = logging.getLogger("srl")
    if level is None or not log.isEnabledFor(level):
        return
    secs = -(-(time.time_ns() + d.retry_after_ns) // 1000000000)
    until = datetime.datetime.fromtimestamp(secs, datetime.timezone.utc)
    log.log(level, "ban started: key %s, policy %s, until %s", _key_display(key), policy,
            until.strftime("%Y-%m-%dT%H:%M:%SZ"))


_srl._set_ban_hook(_log_ban)


class holding:
    """with srl.holding(lim, key) as d: one in-flight unit (policy "concurrency:N"),
    left on every exit path; d.allowed False when the key was full (nothing held).
    A process killed inside is covered by the library: its unit is reclaimed."""

    def __init__(self, lim, key):
        self.lim, self.key, self.lease = lim, key, None

    def __enter__(self):
        d, self.lease = self.lim.enter(self.key)
        return d

    def __exit__(self, *exc):
        if self.lease is not None:
            self.lim.leave(self.lease)
            self.lease = None
        return False


class Error(Exception):
    """An SRL_E* error: code (negative int), name ("SRL_EPOLICY"), message."""

    decision = None  # acquire()'s on_full answer, if the library still decided (FLAG_DEGRADED)

    def __init__(self, code, name, message):
        super().__init__(code, name, message)
        self.code = code
        self.name = name
        self.message = message

    def __str__(self):
        return "%s [%s]" % (self.message, self.name)


# code name -> class name; each class is a subclass of Error and nothing else,
# so `except srl.Error` catches every failure of the library and nothing more.
_CLASSES = {
    "SRL_EINVAL": "ArgumentError",
    "SRL_EPOLICY": "PolicyError",
    "SRL_ECOST": "CostError",
    "SRL_EKEY": "InvalidKeyError",
    "SRL_ENOMEM": "NoMemoryError",
    "SRL_ENOBUFS": "BufferTooSmallError",
    "SRL_ENOENT": "NotFoundError",
    "SRL_EEXIST": "ExistsError",
    "SRL_EMISMATCH": "MismatchError",
    "SRL_EFOREIGN": "ForeignError",
    "SRL_EVERSION": "VersionError",
    "SRL_ECORRUPT": "CorruptError",
    "SRL_ESTALE": "StaleError",
    "SRL_EACCES": "AccessError",
    "SRL_ENOSPC": "NoSpaceError",
    "SRL_ETIMEDOUT": "TimeoutError",
    "SRL_ENOTRECOVERABLE": "NotRecoverableError",
    "SRL_ENOTSUP": "NotSupportedError",
    "SRL_ESYS": "SysError",
    "SRL_ETOOBIG": "TooBigError",
}

_by_code = {}
for _code_name, _cls_name in _CLASSES.items():
    _code = getattr(_srl, _code_name)
    _cls = type(_cls_name, (Error,), {
        "__doc__": "%s: %s" % (_code_name, strerror(_code)),
        "__module__": __name__,
    })
    globals()[_code_name] = _code
    globals()[_cls_name] = _cls
    __all__ += [_code_name, _cls_name]
    _by_code[_code] = _cls
del _code_name, _cls_name, _code, _cls
_srl._register_errors(Error, _by_code)
