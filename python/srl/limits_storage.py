"""srl.limits_storage - a storage for the `limits` package (Flask-Limiter, slowapi).

    import srl.limits_storage          # registers the "srl" scheme with limits
    limiter = Limiter(get_remote_address, app=app, storage_uri="srl:///myapp")

Importing this module defines SrlStorage, whose STORAGE_SCHEME makes limits'
registry (limits.storage.registry.SCHEMES, filled by a metaclass when the
class is defined) map "srl" to it; limits 2.8 has no entry point for
storages, so the import must come before the Limiter is made.

The URI: srl:///PREFIX[?capacity=N].  PREFIX is the start of every segment
name (srl_name_check's bytes, no "/"); capacity is each segment's key
capacity (default: the library's).  Every count lives in srl segments, so
every process of the host that uses the same URI counts against one limit.

Design (the per-call limits of limits' strategies; srl segments hold one
policy each, so one segment per distinct window or limit, created on first
use with the policy derived from limits' arguments):
  - fixed window (incr/get/get_expiry): segment PREFIX.fw.E, policy
    fixed_window:4294967295/Es (E = expiry in seconds).  srl counts every
    hit (no limits limit comes near 2^32 - 1), the window opens at the key's
    first hit and lasts E seconds, as in limits' memory and redis storages;
    limits compares incr's result with the limit itself, so hits over the
    limit are counted, as limits' own storages count them.
  - moving window (acquire_entry/get_moving_window): segment
    PREFIX.mw.N.E, policy sliding_log:N/Es (N <= 4096, srl's sliding_log
    bound); a refused acquire takes nothing, as in limits.
  - get, get_expiry and clear take only a key.  limits' keys end in
    "/AMOUNT/MULTIPLES/GRANULARITY" (LIMITER/127.0.0.1/12/1/hour), which
    names E; any other key is looked for in every PREFIX.* segment that
    exists on the host (/dev/shm).
  - fixed-window-elastic-expiry is not supported (srl's fixed window does
    not move its end): incr(elastic_expiry=True) raises NotImplementedError.
  - reset() unlinks every PREFIX.* segment and returns how many; processes
    that hold a handle keep counting in the unlinked segment until they
    reopen, so reset() is for tests and maintenance, not a live service.
"""
import os
import time
import urllib.parse

from limits.limits import TIME_TYPES
from limits.storage import MovingWindowSupport, Storage

import srl

COUNT_MAX = 4294967295            # SRL_PERMITS_MAX: the fixed window's "no limit"
_SHM = "/dev/shm"


def _expiry_of(key):
    """E in seconds from a limits key (".../AMOUNT/MULTIPLES/GRANULARITY"), or None."""
    parts = key.rsplit("/", 3)
    if len(parts) != 4:
        return None
    _, amount, multiples, gran = parts
    g = TIME_TYPES.get(gran)
    if g is None or not amount.isdigit() or not multiples.isdigit():
        return None
    return g.seconds * int(multiples)


class SrlStorage(Storage, MovingWindowSupport):
    """limits storage over srl shared segments: exact across processes."""

    STORAGE_SCHEME = ["srl"]

    def __init__(self, uri=None, **options):
        u = urllib.parse.urlparse(uri or "")
        prefix = u.path.lstrip("/") or u.netloc
        if not prefix or "/" in prefix:
            raise ValueError("srl: storage uri %r names no segment prefix: use srl:///PREFIX "
                             "(e.g. srl:///myapp)" % (uri,))
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        self.capacity = None
        for k, v in q.items():
            if k != "capacity" or len(v) != 1 or not v[0].isdigit() or int(v[0]) < 1:
                raise ValueError("srl: storage uri %r: bad option %r (the only option is "
                                 "capacity=N, N >= 1)" % (uri, k))
            self.capacity = int(v[0])
        if "capacity" in options:
            self.capacity = int(options.pop("capacity"))
        self.prefix = prefix
        self._lims = {}               # segment name -> srl.Limiter (handles only)
        self._pid = os.getpid()
        super().__init__(uri, **options)

    # -- segments ---------------------------------------------------------

    def _open(self, name, policy):
        if self._pid != os.getpid():  # a forked worker: its own handles
            self._lims, self._pid = {}, os.getpid()
        lim = self._lims.get(name)
        if lim is None:
            kw = {} if self.capacity is None else {"capacity": self.capacity}
            lim = srl.Limiter.shared(name, policy, **kw)
            self._lims[name] = lim
        return lim

    def _fw(self, expiry):
        expiry = int(expiry)
        return self._open("%s.fw.%d" % (self.prefix, expiry),
                          "fixed_window:%d/%ds" % (COUNT_MAX, expiry))

    def _mw(self, limit, expiry):
        return self._open("%s.mw.%d.%d" % (self.prefix, int(limit), int(expiry)),
                          "sliding_log:%d/%ds" % (int(limit), int(expiry)))

    def _segments(self):
        """(name, limiter) of every PREFIX.fw.* / PREFIX.mw.* segment on the host."""
        try:
            names = sorted(os.listdir(_SHM))
        except OSError:
            names = []
        out = []
        for n in names:
            rest = n[len(self.prefix) + 1:] if n.startswith(self.prefix + ".") else ""
            parts = rest.split(".")
            try:
                if len(parts) == 2 and parts[0] == "fw":
                    out.append((n, self._fw(int(parts[1]))))
                elif len(parts) == 3 and parts[0] == "mw":
                    out.append((n, self._mw(int(parts[1]), int(parts[2]))))
            except (ValueError, srl.Error):
                continue      # not one of ours, or gone meanwhile
        return out

    def _fw_of(self, key):
        """The fixed-window handles that may hold key."""
        e = _expiry_of(key)
        if e is not None:
            return [self._fw(e)]
        return [lim for n, lim in self._segments() if ".fw." in n[len(self.prefix):]]

    @staticmethod
    def _count(d):
        """Admitted in the key's window, from a peek of cost 1 (None: untracked)."""
        return 0 if d is None else d.limit - d.remaining - (1 if d.allowed else 0)

    # -- limits' Storage ----------------------------------------------------

    def incr(self, key, expiry, elastic_expiry=False, amount=1):
        if elastic_expiry:
            raise NotImplementedError("srl: fixed-window-elastic-expiry is not supported "
                                      "(use strategy fixed-window or moving-window)")
        d = self._fw(expiry).acquire(key, cost=amount)
        if not d.allowed:
            return COUNT_MAX + amount     # over every limit limits can hold
        return d.limit - d.remaining

    def get(self, key):
        for lim in self._fw_of(key):
            c = self._count(lim.peek(key))
            if c:
                return c
        return 0

    def get_expiry(self, key):
        now = time.time()
        for lim in self._fw_of(key):
            d = lim.peek(key)
            if self._count(d):
                return int(now + d.reset_after_ns / 1e9)
        return int(now)

    def check(self):
        try:
            self._segments()
            return os.path.isdir(_SHM)
        except Exception:
            return False

    def reset(self):
        n = 0
        for name, lim in self._segments():
            lim.close()
            self._lims.pop(name, None)
            try:
                srl.unlink(name)
                n += 1
            except srl.Error:
                pass
        return n

    def clear(self, key):
        e = _expiry_of(key)
        for name, lim in self._segments():
            if e is not None and name.startswith("%s.fw." % self.prefix) and \
                    name != "%s.fw.%d" % (self.prefix, e):
                continue
            lim.reset(key)
        if e is not None:
            self._fw(e).reset(key)

    # -- limits' MovingWindowSupport ------------------------------------------

    def acquire_entry(self, key, limit, expiry, amount=1):
        if amount > limit:
            return False
        return bool(self._mw(limit, expiry).acquire(key, cost=amount).allowed)

    def get_moving_window(self, key, limit, expiry):
        now = time.time()
        d = self._mw(limit, expiry).peek(key)
        acquired = self._count(d)
        if acquired == 0:
            return int(now), 0
        # The newest entry in the window, as limits' memory and redis
        # storages report it.  A denied peek's reset_after is when it leaves
        # the log (an admitted one's counts the entry it would add), and a
        # cost of one more than is left is denied.
        lim = self._mw(limit, expiry)
        d = lim.peek(key, cost=limit - acquired + 1)
        return int(now + (d.reset_after_ns - int(expiry) * 10**9) / 1e9), acquired
