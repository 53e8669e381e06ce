"""test_redis.py - the Python binding on the Redis and fronted stores, and
the errors that name their cause (suite 'python'), run by meson test.

A real redis-server started here on a unix socket in a temporary
directory (no persistence, no TCP port), stopped by its pid; a hostile peer
(tests/fake_redis.py http: an HTTP answer to anything) for "not RESP"; a
loopback port bound and closed for "connection refused".  Policies have
day-long windows, so every count is exact and nothing here is timed.  The
permission case runs a child as nobody (setpriv), so it needs root.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import srl
import srl.wsgi

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_REDIS = os.environ.get("FAKE_REDIS_PY", os.path.join(HERE, "..", "..", "tests",
                                                          "fake_redis.py"))


def start_redis(tmp):
    sock = os.path.join(tmp, "redis.sock")
    p = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
                          "--appendonly", "no", "--dir", tmp],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:   # ready once it accepts a connection (not a timed assertion)
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sock)
            s.sendall(b"PING\r\n")
            if s.recv(16).startswith(b"+PONG"):
                return p, sock
        except OSError:
            pass
        finally:
            s.close()
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise RuntimeError("redis-server did not start")
        time.sleep(0.01)


def refused_port():
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="srl-pyredis-")
        cls.server, cls.sock = start_redis(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.server.kill()
        cls.server.wait()

    def uri(self, prefix):
        return "unix://%s?prefix=%s-%d" % (self.sock, prefix, os.getpid())

    def seg(self, tag):
        name = "srl-pyredis-%d-%s" % (os.getpid(), tag)
        self.addCleanup(self.unlink_quiet, name)
        return name

    @staticmethod
    def unlink_quiet(name):
        try:
            srl.unlink(name)
        except srl.NotFoundError:
            pass


class TestRedisStore(Base):
    def test_redis_decides_exactly_across_handles_and_refunds(self):
        u = self.uri("tb")
        a = srl.Limiter.redis(u, "token_bucket:5/1d")
        b = srl.Limiter.redis(u)   # adopts the store's policy
        self.assertEqual((a.kind, b.kind, b.policy), ("redis", "redis", "token_bucket:5/1d"))
        self.assertEqual(a.name, "tb-%d" % os.getpid())   # the prefix
        got = [(h.acquire("k").allowed, h.acquire("k").remaining) for h in (a, b)]
        self.assertEqual(got, [(True, 3), (True, 1)])
        d = a.acquire("k")
        self.assertEqual((d.allowed, d.remaining), (True, 0))
        d = b.acquire("k")
        self.assertEqual((d.allowed, d.remaining, d.retry_after, d.limit), (False, 0, 17280, 5))
        # refund: the permit comes back to every handle; an untracked key has none
        self.assertIs(a.refund("k"), True)
        self.assertIs(a.refund("never-seen"), False)
        d = b.acquire("k")
        self.assertEqual((d.allowed, d.remaining), (True, 0))
        self.assertFalse(a.acquire("k").allowed)
        with self.assertRaises(srl.CostError) as cm:
            a.refund("k", 6)
        self.assertEqual(str(cm.exception),
                         "srl_refund: cost 6: cost is zero or exceeds the policy's permits: "
                         "'token_bucket:5/1d' allows 5 at most [SRL_ECOST]")
        a.close()
        b.close()

    def test_fronted_answers_a_denied_key_on_the_host(self):
        name = self.seg("front")
        f = srl.Limiter.fronted(name, self.uri("fr"), "token_bucket:2/1d", capacity=64)
        self.assertEqual((f.kind, f.name), ("fronted", name))
        flags = [(d.allowed, d.flags) for d in (f.acquire("k") for _ in range(4))]
        # the third is Redis's denial; the fourth the host's (FLAG_LOCAL)
        self.assertEqual(flags, [(True, 0), (True, 0), (False, 0), (False, srl.FLAG_LOCAL)])
        self.assertIs(f.refund("k"), True)   # on Redis, and the host forgets the ban
        self.assertEqual([f.acquire("k").allowed for _ in range(2)], [True, False])
        f.close()
        # shared() with redis= in the spec is the same store
        g = srl.Limiter.shared(name, "token_bucket:2/1d redis=%s" % self.uri("fr"), capacity=64)
        self.assertEqual((g.kind, g.acquire("k").flags), ("fronted", srl.FLAG_LOCAL))
        g.close()

    def test_concurrency_with_redis_is_redis_alone(self):
        # a concurrency limit with redis=: the Redis store itself holds the
        # units (no host segment); redis() takes it too
        name = self.seg("conc")
        for lim in (srl.Limiter.shared(name, "concurrency:2 redis=%s" % self.uri("cc"),
                                       capacity=64),
                    srl.Limiter.redis(self.uri("cc"), "concurrency:2")):
            self.assertEqual(lim.kind, "redis")
            (d1, l1), (d2, l2), (d3, l3) = (lim.enter("c") for _ in range(3))
            self.assertEqual((d1.allowed, d2.allowed, d3.allowed), (True, True, False))
            self.assertIsNone(l3)
            self.assertIs(lim.leave(l1), True)
            self.assertIs(lim.leave(l1), False)   # once
            d4, l4 = lim.enter("c")
            self.assertTrue(d4.allowed)
            self.assertIs(lim.leave(l2), True)
            self.assertIs(lim.leave(l4), True)
            lim.close()
        self.assertFalse(os.path.exists("/dev/shm/" + name.lstrip("/")))

    def test_wsgi_on_redis_and_fronted_names_the_policy_after_the_limiter(self):
        name = self.seg("wsgi")
        for lim, token in ((srl.Limiter.redis(self.uri("w"), "token_bucket:2/1d"),
                            "w-%d" % os.getpid()),
                           (srl.Limiter.fronted(name, self.uri("wf"), "token_bucket:2/1d",
                                                capacity=64), name)):
            seen = []

            def app(environ, start_response):
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"ok"]

            def start(status, headers, exc_info=None):
                seen.append((status, dict(headers)))

            mw = srl.wsgi.RateLimit(app, lim)
            for _ in range(3):
                mw({"REMOTE_ADDR": "192.0.2.1"}, start)
            self.assertEqual([s for s, _ in seen], ["200 OK", "200 OK", "429 Too Many Requests"])
            self.assertEqual(seen[0][1]["RateLimit-Policy"], '"%s";q=2;w=86400' % token)
            self.assertEqual(seen[2][1]["Retry-After"], "43200")
            lim.close()
        # anonymous and local have no name: "default", as before
        mw = srl.wsgi.RateLimit(lambda e, s: (s("200 OK", []), [b"ok"])[1],
                                srl.Limiter.local("token_bucket:2/1d"))
        got = []
        mw({"REMOTE_ADDR": "x"}, lambda st, h, e=None: got.append(dict(h)))
        self.assertEqual(got[0]["RateLimit-Policy"], '"default";q=2;w=86400')

    def test_wsgi_answers_a_down_server_by_on_full(self):
        port = refused_port()
        for on_full, status in (("allow", "200 OK"), ("deny", "429 Too Many Requests")):
            lim = srl.Limiter.redis("redis://127.0.0.1:%d?prefix=x" % port, "token_bucket:2/1d",
                                    on_full)
            got = []
            mw = srl.wsgi.RateLimit(lambda e, s: (s("200 OK", []), [b"ok"])[1], lim)
            mw({"REMOTE_ADDR": "192.0.2.1"}, lambda st, h, e=None: got.append(st))
            self.assertEqual(got, [status])
            lim.close()


class TestCauses(Base):
    """Each error names its cause, with the library's exact words."""

    def test_connection_refused(self):
        port = refused_port()
        lim = srl.Limiter.redis("redis://127.0.0.1:%d?prefix=x" % port, "token_bucket:5/1d")
        with self.assertRaises(srl.SysError) as cm:
            lim.acquire("k")
        # the store's backoff may answer before it dials again: it says so
        self.assertRegex(str(cm.exception),
                         r"^srl_acquire: system or network error: connect 127\.0\.0\.1:%d: "
                         r"connection refused( \(retrying in \d+ ms\))? \[SRL_ESYS\]$" % port)
        self.assertTrue(cm.exception.decision.allowed)   # on_full allow, flagged degraded
        self.assertEqual(cm.exception.decision.flags, srl.FLAG_DEGRADED)
        lim.close()
        # adopting needs the stored policy: the open itself fails, naming the server
        with self.assertRaises(srl.SysError) as cm:
            srl.Limiter.redis("redis://:secret@127.0.0.1:%d?prefix=x" % port)
        self.assertEqual(str(cm.exception),
                         "srl_open_redis: system or network error: connect 127.0.0.1:%d: "
                         "connection refused [SRL_ESYS]" % port)
        self.assertNotIn("secret", str(cm.exception))

    def test_a_peer_that_is_not_redis(self):
        fake = subprocess.Popen([sys.executable, FAKE_REDIS, "http"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            port = int(fake.stdout.readline().split()[1])   # "ready PORT"
            with self.assertRaises(srl.SysError) as cm:
                srl.Limiter.redis("redis://127.0.0.1:%d?prefix=x" % port, "token_bucket:5/1d")
            self.assertEqual(str(cm.exception),
                             "srl_open_redis: system or network error: reply from "
                             "127.0.0.1:%d is not RESP: is it Redis? [SRL_ESYS]" % port)
        finally:
            fake.stdin.close()
            fake.wait()

    def test_a_bad_uri_names_the_bad_part(self):
        with self.assertRaises(srl.ArgumentError) as cm:
            srl.Limiter.redis("redis://127.0.0.1:99999?prefix=x", "5/1d")
        self.assertEqual(str(cm.exception),
                         "srl_open_redis: invalid argument: redis uri: port must be 1..65535, "
                         "not '99999' [SRL_EINVAL]")

    @unittest.skipUnless(os.geteuid() == 0, "needs root to run a child as nobody")
    def test_another_users_segment_names_owner_mode_and_fix(self):
        name = self.seg("acc")
        srl.Limiter.shared(name, "token_bucket:5/1d", capacity=64).close()
        self.assertEqual(os.stat("/dev/shm/" + name).st_mode & 0o777, 0o600)
        child = ("import srl, sys\n"
                 "for open_ in (lambda: srl.Limiter.shared(%r, 'token_bucket:5/1d', capacity=64),\n"
                 "              lambda: srl.Limiter.shared(%r, None, create=False),\n"
                 "              lambda: srl.Limiter.fronted(%r, 'redis://127.0.0.1:%d?prefix=x',\n"
                 "                                          'token_bucket:5/1d', capacity=64)):\n"
                 "    try:\n"
                 "        open_()\n"
                 "    except srl.AccessError as e:\n"
                 "        print(e)\n" % (name, name, name, refused_port()))
        out = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                              sys.executable, "-c", child], capture_output=True, text=True,
                             env=dict(os.environ), check=True).stdout.splitlines()
        why = ("permission denied (segment owner or mode refused): segment /%s is owned by "
               "root (uid 0), mode 0600; this process runs as nobody (uid 65534), which cannot "
               "open it: run as root, or create it owned by the user that uses it (rlctl "
               "--owner USER create ...), or with mode 0660 and a group both share "
               "[SRL_EACCES]" % name)
        self.assertEqual(out, ["srl_open_shared('%s'): %s" % (name, why)] * 2 +
                              ["srl_open_fronted('%s'): %s" % (name, why)])


class TestMessages(unittest.TestCase):
    """issue 39's minors: what is wrong, in words, never a bare 'invalid argument'."""

    def test_each_bad_argument_says_what_is_wrong(self):
        cases = [
            (lambda: srl.Limiter.anonymous("5/1d", capacity=0), ValueError,
             "capacity: expected a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"),
            (lambda: srl.Limiter.anonymous("5/1d", capacity=-1), ValueError,
             "capacity: expected a number of keys, 1..4294967296 (suffix k, M or G: 1000s)"),
            (lambda: srl.Limiter.shared("a/b", "5/1d"), srl.ArgumentError,
             "srl_open_shared('a/b'): invalid argument: a segment name is an optional '/', "
             "then 1..200 bytes of [A-Za-z0-9._-] (no other '/'), not all dots [SRL_EINVAL]"),
            (lambda: srl.Limiter.local("token_bucket:5/1d").acquire("k", 6), srl.CostError,
             "srl_acquire: cost 6: cost is zero or exceeds the policy's permits: "
             "'token_bucket:5/1d' allows 5 at most [SRL_ECOST]"),
            (lambda: srl.Limiter.local("token_bucket:5/1d + token_bucket:100/1d")
             .acquire("k", 6), srl.CostError,
             "srl_acquire: cost 6: cost is zero or exceeds the policy's permits: "
             "'token_bucket:5/1d + token_bucket:100/1d' allows 5 at most [SRL_ECOST]"),
            (lambda: srl.Limiter.local("token_bucket:5/1d").acquire("k", 0), srl.CostError,
             "srl_acquire: cost 0: cost is zero or exceeds the policy's permits: a request "
             "costs 1 or more [SRL_ECOST]"),
            # lockfree=True on a token bucket: refused as mod_srl refuses
            # "SrlLimiter ... token_bucket:5/1d lockfree=on", the library's sentence
            (lambda: srl.Limiter.anonymous("token_bucket:5/1d", lockfree=True), ValueError,
             "lockfree: lockfree=on decides gcra limits only, and 'token_bucket:5/1d' has none "
             "in any tier: use gcra:N/W, or drop lockfree="),
        ]
        for fn, cls, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(cls) as cm:
                    fn()
                self.assertEqual(str(cm.exception), text)

    def test_lockfree_refusal_is_the_librarys_for_the_same_config(self):
        with self.assertRaises(srl.PolicyError) as cm:
            srl.Limiter.local("token_bucket:5/1d lockfree=on")
        self.assertIn("lockfree=on decides gcra limits only, and 'token_bucket:5/1d' has none "
                      "in any tier: use gcra:N/W, or drop lockfree=", str(cm.exception))
        srl.Limiter.local("gcra:5/1d", lockfree=True).close()   # gcra: taken


if __name__ == "__main__":
    unittest.main(verbosity=2)
