"""test_binding.py - the srl Python binding (suite 'python'), run by meson test.

Exact decisions on fixed policies with day-long windows (nothing refills
during a test, so every remaining count, Retry-After and header is exact);
every error class with its SRL_E* code; str and bytes naming the same key;
an anonymous limiter shared with a forked child; the WSGI middleware called
directly with environ dicts.  Nothing here is timed.
"""
import os
import platform
import subprocess
import sys
import unittest

import srl
import srl.wsgi

TOKEN_S = 86400 // 5   # one token of 5/1d, in seconds


def seg(tag):
    return "srl-pytest-%d-%s" % (os.getpid(), tag)


def unlink_quiet(name):
    try:
        srl.unlink(name)
    except srl.NotFoundError:
        pass


class TestDecisions(unittest.TestCase):
    def test_token_bucket_exact(self):
        for lim in (srl.Limiter.local("token_bucket:5/1d"),
                    srl.Limiter.anonymous("token_bucket:5/1d", capacity=64)):
            with lim:
                for want in (4, 3, 2, 1, 0):
                    d = lim.acquire("user-1")
                    self.assertTrue(d.allowed)
                    self.assertTrue(d)
                    self.assertEqual((d.limit, d.remaining, d.retry_after_ns, d.flags, d.retry_after),
                                     (5, want, 0, 0, 0))
                d = lim.acquire("user-1")
                self.assertFalse(d.allowed)
                self.assertFalse(d)
                self.assertEqual((d.limit, d.remaining, d.retry_after), (5, 0, TOKEN_S))
                self.assertGreater(d.retry_after_ns, (TOKEN_S - 1) * 10**9)
                self.assertLessEqual(d.retry_after_ns, TOKEN_S * 10**9)
                self.assertEqual(d.policy, "token_bucket:5/1d")
                # A denial takes nothing; another key is untouched.
                self.assertEqual(lim.peek("user-1").remaining, 0)
                self.assertEqual(lim.acquire("user-2").remaining, 4)
                st = lim.stats()
                self.assertEqual((st["allowed"], st["denied"], st["used"], st["full"]), (6, 1, 2, 0))

    def test_tiers_each_key_its_tiers_limit_and_a_moved_key_keeps_its_use(self):
        name = "/srl-py-tiers-%d" % os.getpid()
        for lim in (srl.Limiter.anonymous("token_bucket:2/1d", capacity=64,
                                          tiers={"paid": "token_bucket:5/1d"}),
                    srl.Limiter.shared(name, "token_bucket:2/1d", capacity=64,
                                       tiers={"paid": "token_bucket:5/1d"}, exclusive=True)):
            with lim:
                got = {k: sum(lim.acquire(k, tier=t).allowed for _ in range(10))
                       for k, t in (("f", None), ("d", "default"), ("p", "paid"))}
                self.assertEqual(got, {"f": 2, "d": 2, "p": 5})
                d = lim.acquire("q", tier="paid")
                self.assertEqual((d.limit, d.remaining, d.policy), (5, 4, "token_bucket:5/1d"))
                # "f" used 2 of 2: under paid it has 5 - 2 left.
                self.assertEqual(sum(lim.acquire("f", tier="paid").allowed for _ in range(10)), 3)
                with self.assertRaises(srl.NotFoundError):
                    lim.acquire("k", tier="gold")
        # Another table on the same segment is a mismatch; the local store has none.
        with self.assertRaises(srl.Error):
            srl.Limiter.shared(name, "token_bucket:2/1d", capacity=64,
                               tiers={"paid": "token_bucket:6/1d"})
        srl.unlink(name)
        with self.assertRaises(srl.Error):
            srl.Limiter.local("token_bucket:2/1d", tiers={"paid": "token_bucket:5/1d"})
        with self.assertRaises(ValueError):
            srl.Limiter.anonymous("2/1d", tiers={"has space": "5/1d"})

    def test_change_true_gives_the_segment_the_new_limit_and_each_key_keeps_its_use(self):
        name = "/srl-py-change-%d" % os.getpid()
        try:
            old = srl.Limiter.shared(name, "token_bucket:3/1d", capacity=64, exclusive=True)
            self.assertEqual(sum(old.acquire("k").allowed for _ in range(5)), 3)
            # Without change=True another policy is refused, naming both and
            # the remedy in Python's words (change=True, not a C flag).
            with self.assertRaises(srl.MismatchError) as e:
                srl.Limiter.shared(name, "token_bucket:6/1d", capacity=64)
            self.assertEqual(
                str(e.exception),
                "srl_open_shared('%s'): policy: the segment has token_bucket:3/1d, this config "
                "asks for token_bucket:6/1d (use the segment's policy, or change it live, "
                "keeping each key's use: rlctl set-policy, or open with change=True; or another "
                "segment name, or destroy it: its keys start fresh): segment exists with a "
                "different policy or geometry [SRL_EMISMATCH]" % name)
            new = srl.Limiter.shared(name, "token_bucket:6/1d", capacity=64, change=True)
            self.assertEqual(new.info()["policy_gen"], 1)
            # The key that used 3 of 3 gets exactly 3 more, not 6; through
            # the handle opened before the change too (it reads the generation).
            self.assertEqual(sum(old.acquire("k").allowed for _ in range(5)), 3)
            self.assertEqual(sum(new.acquire("fresh").allowed for _ in range(8)), 6)
            # The same policy again changes nothing.
            srl.Limiter.shared(name, "token_bucket:6/1d", capacity=64, change=True).close()
            self.assertEqual(new.info()["policy_gen"], 1)
            old.close()
            new.close()
        finally:
            srl.unlink(name)

    def test_cost(self):
        lim = srl.Limiter.local("5/1d")
        self.assertEqual(lim.acquire("k", cost=3).remaining, 2)
        d = lim.acquire("k", 3)
        self.assertEqual((d.allowed, d.remaining, d.retry_after), (False, 2, TOKEN_S))
        self.assertEqual(lim.acquire("k", 2).remaining, 0)

    def test_compound_all_or_nothing(self):
        for lim in (srl.Limiter.local("token_bucket:10/1d + sliding_log:3/1d"),
                    srl.Limiter.anonymous("token_bucket:10/1d+sliding_log:3/1d", capacity=64)):
            with lim:
                self.assertEqual(lim.policy, "token_bucket:10/1d + sliding_log:3/1d")
                self.assertEqual([lim.acquire("k").remaining for _ in range(3)], [2, 1, 0])
                d = lim.acquire("k")
                self.assertEqual((d.allowed, d.binding, d.limit, d.retry_after), (False, 1, 3, 86400))
                self.assertEqual(dict(srl.headers(d, "api"))["RateLimit-Policy"],
                                 '"api.0";q=10;w=86400, "api.1";q=3;w=86400')
        with self.assertRaises(srl.PolicyError) as e:
            srl.Limiter.local("token_bucket:10/1d + ")
        self.assertIn("empty limit", str(e.exception))

    def test_reserve_waits_in_line_and_refuses_beyond_max_wait(self):
        # 1 per 10 min: one at once, then each reservation waits 10 min
        # more; beyond max_wait_ns nothing is taken; 0 is acquire()
        day = 600 * 10**9   # one interval
        for lim in (srl.Limiter.local("token_bucket:1/10m"),
                    srl.Limiter.anonymous("gcra:1/10m", capacity=64)):
            with lim:
                self.assertEqual(lim.reserve("k", 3 * day).wait_ns, 0)
                w1 = lim.reserve("k", 3 * day)
                self.assertTrue(w1.allowed)
                self.assertTrue(day - 10**9 < w1.wait_ns <= day)
                w2 = lim.reserve("k", 3 * day)
                self.assertTrue(w1.wait_ns + day - 10**9 < w2.wait_ns <= w1.wait_ns + day)
                d = lim.reserve("k", day)             # would wait ~3 intervals
                self.assertFalse(d.allowed)
                self.assertEqual(d.wait_ns, 0)
                d = lim.reserve("k", 0)               # acquire: denied
                self.assertFalse(d.allowed)
                self.assertEqual(lim.acquire("k").allowed, False)
                self.assertEqual(lim.acquire("x").wait_ns, 0)
        with self.assertRaises(srl.Error) as e:
            srl.Limiter.local("sliding_log:3/1d").reserve("k", 1)
        self.assertEqual(e.exception.name, "SRL_ENOTSUP")
        with self.assertRaises(srl.Error) as e:   # above SRL_WAIT_MAX_NS (1 h)
            srl.Limiter.local("5/1d").reserve("k", 3601 * 10**9)
        self.assertEqual(e.exception.name, "SRL_EINVAL")

    def test_in_flight_units(self):
        n = seg("units")
        try:
            for lim in (srl.Limiter.local("concurrency:2"),
                        srl.Limiter.shared(n, "concurrency:2", capacity=64)):
                with lim:
                    d1, l1 = lim.enter("c")
                    d2, l2 = lim.enter("c")
                    d3, l3 = lim.enter("c")
                    self.assertEqual((d1.allowed, d1.remaining, d2.remaining), (True, 1, 0))
                    self.assertEqual((d3.allowed, d3.retry_after, l3), (False, 1, None))
                    self.assertTrue(lim.leave(l1))
                    self.assertFalse(lim.leave(l1))        # never released twice
                    with srl.holding(lim, "c") as d:
                        self.assertTrue(d.allowed)
                        self.assertFalse(lim.enter("c")[0].allowed)
                    self.assertTrue(lim.leave(l2))
                    self.assertEqual(lim.peek("c").remaining, 1)  # both free again
                    with self.assertRaises(srl.NotSupportedError) as e:
                        lim.acquire("c")
                    self.assertEqual(e.exception.code, -18)
            self.assertEqual(srl.Limiter.local("concurrency:2").kind, "local")
        finally:
            unlink_quiet(n)

    def test_sliding_log_exact(self):
        lim = srl.Limiter.local("sliding_log:3/1d")
        self.assertEqual([lim.acquire(b"k").remaining for _ in range(3)], [2, 1, 0])
        d = lim.acquire(b"k")
        self.assertEqual((d.allowed, d.retry_after), (False, 86400))

    def test_peek_and_reset(self):
        lim = srl.Limiter.local("5/1d")
        self.assertIsNone(lim.peek("new"))
        self.assertFalse(lim.reset("new"))
        lim.acquire("k", cost=5)
        self.assertEqual(lim.peek("k").allowed, False)
        self.assertEqual(lim.peek("k").remaining, 0)   # peek took nothing either
        self.assertTrue(lim.reset("k"))
        self.assertIsNone(lim.peek("k"))
        self.assertEqual(lim.acquire("k").remaining, 4)

    def test_str_and_bytes_are_one_key(self):
        lim = srl.Limiter.local("5/1d")
        self.assertEqual(lim.acquire("clé").remaining, 4)
        self.assertEqual(lim.acquire("clé".encode("utf-8")).remaining, 3)
        self.assertEqual(lim.acquire(bytearray("clé", "utf-8")).remaining, 2)
        self.assertEqual(lim.acquire(memoryview("clé".encode())).remaining, 1)
        self.assertEqual(lim.acquire("clé".encode("latin-1")).remaining, 4)  # other bytes
        self.assertEqual(lim.stats()["used"], 2)
        with self.assertRaises(TypeError):
            lim.acquire(42)

    def test_headers_exact(self):
        lim = srl.Limiter.local("5/1d")
        d = lim.acquire("k")
        self.assertEqual(srl.headers(d), [("RateLimit-Policy", '"default";q=5;w=86400'),
                                          ("RateLimit", '"default";r=4;t=%d' % TOKEN_S)])
        lim.acquire("k", cost=4)
        d = lim.acquire("k")
        self.assertEqual(srl.headers(d, "api"), [("RateLimit-Policy", '"api";q=5;w=86400'),
                                                 ("RateLimit", '"api";r=0;t=%d' % TOKEN_S),
                                                 ("Retry-After", str(TOKEN_S))])
        with self.assertRaises(srl.ArgumentError) as cm:
            srl.headers(d, "not a token")
        self.assertEqual(cm.exception.code, srl.SRL_EINVAL)
        with self.assertRaises(TypeError):
            srl.headers("not a decision")

    def test_fork_shares_anonymous(self):
        lim = srl.Limiter.anonymous("5/1d", capacity=64)
        lim.acquire("k")
        pid = os.fork()
        if pid == 0:
            ok = [lim.acquire("k").remaining for _ in range(3)] == [3, 2, 1]
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(lim.acquire("k").remaining, 0)
        self.assertFalse(lim.acquire("k").allowed)

    def test_close_and_context(self):
        lim = srl.Limiter.local("5/1d")
        with lim as same:
            self.assertIs(same, lim)
            self.assertEqual(lim.kind, "local")
        self.assertTrue(lim.closed)
        lim.close()  # twice is harmless
        for call in (lambda: lim.acquire("k"), lambda: lim.peek("k"), lambda: lim.stats(),
                     lambda: lim.reset("k")):
            with self.assertRaises(ValueError):
                call()
        with self.assertRaises(TypeError):
            srl.Limiter()


class TestShared(unittest.TestCase):
    def setUp(self):
        self.names = []

    def tearDown(self):
        for n in self.names:
            unlink_quiet(n)

    def name(self, tag):
        n = seg(tag)
        self.names.append(n)
        return n

    def test_two_handles_one_count(self):
        n = self.name("two")
        a = srl.Limiter.shared(n, "gcra:5/1d", capacity=128, key_display=16)
        b = srl.Limiter.shared(n, None, create=False)   # adopts the segment's policy
        self.assertEqual((a.kind, b.policy), ("shared", "gcra:5/1d"))
        self.assertEqual([a.acquire("k").remaining, b.acquire(b"k").remaining,
                          a.acquire("k").remaining], [4, 3, 2])
        self.assertEqual(b.stats()["allowed"], 3)
        a.close()
        b.close()

    def test_dry_run_allows_flags_and_counts(self):
        # An enforcing and a dry-run handle on one segment: the dry one is
        # allowed where the other would refuse, flagged, with the denial's
        # wait; both see the segment's would_deny.
        n = self.name("dry")
        a = srl.Limiter.shared(n, "token_bucket:5/1d", capacity=64)
        b = srl.Limiter.shared(n, None, create=False, dry_run=True)
        for _ in range(5):
            self.assertFalse(a.acquire("k").would_deny)
        for _ in range(3):
            d = b.acquire("k")
            self.assertEqual((d.allowed, d.would_deny, d.remaining, d.retry_after, d.flags),
                             (True, True, 0, TOKEN_S, srl.FLAG_WOULD_DENY))
        d = a.acquire("k")
        self.assertEqual((d.allowed, d.would_deny), (False, False))
        st = a.stats()
        self.assertEqual((st["allowed"], st["denied"], st["would_deny"]), (5, 4, 3))
        a.close()
        b.close()
        with srl.Limiter.local("token_bucket:1/1d", dry_run=True) as lim:
            self.assertEqual([lim.acquire("k").would_deny for _ in range(3)], [False, True, True])
            self.assertEqual(lim.stats()["would_deny"], 2)

    def test_flood_cache_answers_a_denied_key_and_its_counts_arrive_later(self):
        # The flag reaches the handle: its repeated denials of one key are
        # answered without the segment (another process reads 1 denial, not
        # 11), exactly as the lock would answer them, and are counted once it
        # flushes (stats() of any handle of this process flushes them all).
        n = self.name("flood")
        a = srl.Limiter.shared(n, "token_bucket:1/1d", capacity=64, flood_cache=True)
        self.assertTrue(a.acquire("k").allowed)
        first = a.acquire("k")                  # denied under the lock: cached
        for _ in range(10):
            d = a.acquire("k")
            self.assertEqual((d.allowed, d.remaining, d.retry_after),
                             (False, 0, first.retry_after))
        other = subprocess.run(
            [sys.executable, "-c", "import srl, sys; "
             "print(srl.Limiter.shared(sys.argv[1], None, create=False).stats()['denied'])", n],
            capture_output=True, text=True, check=True)
        self.assertEqual(other.stdout.strip(), "1")   # the 10 are pending in this process
        self.assertEqual(a.stats()["denied"], 11)     # stats() flushes them
        a.close()

    def test_lockfree_gcra_admits_exactly_its_permits_in_every_store(self):
        n = self.name("lf")
        stores = [srl.Limiter.shared(n, "gcra:5/1d", capacity=64, lockfree=True),
                  srl.Limiter.anonymous("gcra:5/1d", capacity=64, lockfree=True),
                  srl.Limiter.local("gcra:5/1d", capacity=64, lockfree=True)]
        for lim in stores:
            got = [lim.acquire("k").allowed for _ in range(8)]
            self.assertEqual(got, [True] * 5 + [False] * 3, lim.kind)
            st = lim.stats()
            self.assertEqual((st["allowed"], st["denied"]), (5, 3), lim.kind)
            lim.close()

    def test_info_says_which_flags_took_effect(self):
        # info() reports srl_info.flags, which the library sets from the
        # field its decision path tests: so lockfree True here means the
        # compare-and-swap path is on, which the decisions alone cannot show.
        def opened(store, policy, **kw):
            if store == "shared":
                return srl.Limiter.shared(self.name("fl%d" % len(self.names)), policy,
                                          capacity=64, **kw)
            return getattr(srl.Limiter, store)(policy, capacity=64, **kw)

        def took(store, policy, **kw):
            with opened(store, policy, **kw) as lim:
                i = lim.info()
                return (i["flags"], i["lockfree"], i["flood_cache"], i["dry_run"])

        lf, fc, dr = 0x4, 0x2, 0x1   # SRL_CONFIG_LOCKFREE, _FLOOD_CACHE, _DRY_RUN
        # The shared stores' path needs a 16-byte CAS (x86-64, not built
        # with -DSRL_NO_CAS16; meson says which); local() has it everywhere.
        shm_lf = os.environ.get("SRL_TEST_SHM_LOCKFREE",
                                str(int(platform.machine() == "x86_64"))) == "1"
        for store in ("shared", "anonymous", "local"):
            self.assertEqual(took(store, "gcra:5/1d"), (0, False, False, False), store)
            on = store == "local" or shm_lf
            self.assertEqual(took(store, "gcra:5/1d", lockfree=True),
                             (lf if on else 0, on, False, False), store)
            # token_bucket: refused, with the library's sentence, as mod_srl
            # refuses "SrlLimiter ... token_bucket:5/1d lockfree=on".
            with self.assertRaises(ValueError) as cm:
                opened(store, "token_bucket:5/1d", lockfree=True)
            self.assertEqual(str(cm.exception),
                             "lockfree: lockfree=on decides gcra limits only, and "
                             "'token_bucket:5/1d' has none in any tier: use gcra:N/W, or drop "
                             "lockfree=")
            self.assertEqual(took(store, "token_bucket:5/1d", dry_run=True),
                             (dr, False, False, True), store)
        for store in ("shared", "anonymous"):
            self.assertEqual(took(store, "token_bucket:1/1d", flood_cache=True),
                             (fc, False, True, False), store)
            self.assertEqual(took(store, "gcra:5/1d", lockfree=True, flood_cache=True),
                             ((lf if shm_lf else 0) | fc, shm_lf, True, False), store)
            # A dry run keeps the locked path in every store, so lockfree is off.
            self.assertEqual(took(store, "gcra:5/1d", lockfree=True, flood_cache=True,
                                  dry_run=True), (fc | dr, False, True, True), store)
        # local(): flood_cache changes nothing there, and a dry run keeps the
        # locked path, so neither is reported.
        self.assertEqual(took("local", "token_bucket:1/1d", flood_cache=True),
                         (0, False, False, False))
        self.assertEqual(took("local", "gcra:5/1d", lockfree=True, flood_cache=True,
                              dry_run=True), (dr, False, False, True))

    def assertSrlError(self, cls, code, fn):
        with self.assertRaises(cls) as cm:
            fn()
        e = cm.exception
        self.assertIsInstance(e, srl.Error)
        self.assertEqual(e.code, code)
        self.assertEqual(e.name, [k for k in dir(srl) if k.startswith("SRL_E")
                                  and getattr(srl, k) == code][0])
        self.assertIn(e.name, str(e))
        self.assertIn(srl.strerror(code), e.message)
        return e

    def test_error_codes(self):
        n = self.name("err")
        lim = srl.Limiter.shared(n, "5/1d", capacity=128)
        self.assertSrlError(srl.PolicyError, -2, lambda: srl.Limiter.local("bogus"))
        self.assertSrlError(srl.PolicyError, -2, lambda: srl.Limiter.local("0/1m"))
        self.assertSrlError(srl.CostError, -3, lambda: lim.acquire("k", 0))
        self.assertSrlError(srl.CostError, -3, lambda: lim.acquire("k", 6))
        self.assertSrlError(srl.CostError, -3, lambda: lim.acquire("k", 2**32))
        for bad in (-1, 2**64 + 1):   # never wrapped to a small cost
            with self.assertRaises(OverflowError):
                lim.acquire("k", bad)
        with self.assertRaises(ValueError) as cm:   # the library's words, no OverflowError
            srl.Limiter.local("5/1d", capacity=-1)
        self.assertEqual(str(cm.exception),
                         "capacity: expected a number of keys, 1..4294967296 (suffix k, M or G: "
                         "1000s)")
        with self.assertRaises(TypeError):
            lim.acquire("k", 1.0)
        self.assertSrlError(srl.InvalidKeyError, -4, lambda: lim.acquire(""))
        self.assertSrlError(srl.InvalidKeyError, -4, lambda: lim.acquire(b"x" * (srl.KEY_MAX + 1)))
        self.assertEqual(lim.acquire(b"x" * srl.KEY_MAX).remaining, 4)
        self.assertSrlError(srl.NotFoundError, -7,
                            lambda: srl.Limiter.shared(self.name("none"), None, create=False))
        self.assertSrlError(srl.ExistsError, -8,
                            lambda: srl.Limiter.shared(n, "5/1d", capacity=128, exclusive=True))
        self.assertSrlError(srl.MismatchError, -9, lambda: srl.Limiter.shared(n, "6/1d", capacity=128))
        with self.assertRaises(srl.MismatchError) as e:
            srl.Limiter.shared(n, "6/1d", capacity=128)
        self.assertIn("policy: the segment has token_bucket:5/1d, this config asks for "
                      "token_bucket:6/1d", str(e.exception))
        self.assertSrlError(srl.MismatchError, -9, lambda: srl.Limiter.shared(n, "5/1d", capacity=4096))
        self.assertSrlError(srl.MismatchError, -9,
                            lambda: srl.Limiter.shared(n, "5/1d", capacity=4096, change=True))
        with self.assertRaises(TypeError):
            srl.Limiter.shared(n, None, create=False, change=True)
        self.assertSrlError(srl.ArgumentError, -1, lambda: srl.Limiter.shared("bad/name", "5/1d"))
        # Failed calls changed no count.
        self.assertEqual(lim.stats()["allowed"], 1)
        # Not an srl segment.
        foreign = self.name("foreign")
        with open("/dev/shm/" + foreign, "wb") as f:
            f.write(b"not srl" * 1000)
        self.assertSrlError(srl.ForeignError, -10, lambda: srl.Limiter.shared(foreign, "5/1d"))
        # A segment widened to world-writable after creation is refused.
        os.chmod("/dev/shm/" + n, 0o666)
        self.assertSrlError(srl.AccessError, -14, lambda: srl.Limiter.shared(n, "5/1d", capacity=128))
        lim.close()
        with self.assertRaises(ValueError):
            srl.Limiter.local("5/1d", on_full="maybe")

    def test_error_classes(self):
        seen = set()
        for k in dir(srl):
            if k.startswith("SRL_E"):
                code = getattr(srl, k)
                cls = srl._by_code[code]
                self.assertTrue(issubclass(cls, srl.Error))
                seen.add(cls)
        self.assertEqual(len(seen), 20)
        self.assertIs(srl._by_code[srl.SRL_ETIMEDOUT], srl.TimeoutError)
        self.assertIs(srl._by_code[srl.SRL_EPOLICY], srl.PolicyError)
        self.assertIs(srl._by_code[srl.SRL_ETOOBIG], srl.TooBigError)

    def test_a_capacity_typo_is_refused_with_the_size_it_needs(self):
        # 400M keys where 400k were meant: on any host either more than
        # memory can give (NoSpaceError) or above the 1 GiB guard
        # (TooBigError); made on none, and the library's sentence says why.
        name = "/srl-py-typo-%d" % os.getpid()
        with self.assertRaises((srl.NoSpaceError, srl.TooBigError)) as cm:
            srl.Limiter.shared(name, "gcra:1/1s", capacity=400000000)
        self.assertIn("srl_open_shared('%s'): the segment needs " % name, str(cm.exception))
        self.assertIn(" (capacity 400000000 keys)", str(cm.exception))
        self.assertFalse(os.path.exists("/dev/shm" + name))


class TestWsgi(unittest.TestCase):
    def call(self, mw, environ):
        got = {}

        def start_response(status, headers, exc_info=None):
            got["status"], got["headers"] = status, headers
        body = b"".join(mw(environ, start_response))
        return got["status"], dict(got["headers"]), body

    def test_middleware(self):
        def app(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"pid"]
        mw = srl.wsgi.RateLimit(app, srl.Limiter.local("2/1d"),
                                key=lambda env: env.get("HTTP_X_KEY"), name="api")
        s, h, b = self.call(mw, {"HTTP_X_KEY": "a"})
        self.assertEqual((s, b, h["RateLimit"], h["RateLimit-Policy"], h["Content-Type"]),
                         ("200 OK", b"pid", '"api";r=1;t=43200', '"api";q=2;w=86400', "text/plain"))
        self.assertNotIn("Retry-After", h)
        self.call(mw, {"HTTP_X_KEY": "a"})
        s, h, b = self.call(mw, {"HTTP_X_KEY": "a"})
        self.assertEqual((s, h["Retry-After"], h["RateLimit"], h["Content-Length"]),
                         ("429 Too Many Requests", "43200", '"api";r=0;t=43200', str(len(b))))
        # No key: not limited, no headers.
        for _ in range(3):
            s, h, b = self.call(mw, {})
            self.assertEqual((s, b), ("200 OK", b"pid"))
            self.assertNotIn("RateLimit", h)

    def test_middleware_answers_an_error_the_library_decided(self):
        # An error carrying the library's on_full decision (a Redis store's
        # SRL_ECORRUPT or SRL_ESYS, a lock that timed out) is answered with
        # it; one carrying none propagates.
        denied = srl.Limiter.local("1/1d")
        denied.acquire("k")
        decision = denied.acquire("k")

        class Failing:
            def __init__(self, exc):
                self.exc = exc

            def acquire(self, key, cost):
                raise self.exc

        def app(environ, start_response):
            start_response("200 OK", [])
            return [b"app"]
        corrupt = srl.CorruptError(srl.SRL_ECORRUPT, "SRL_ECORRUPT", "a reply no script gives")
        corrupt.decision = decision
        mw = srl.wsgi.RateLimit(app, Failing(corrupt), key=lambda env: "k")
        s, h, b = self.call(mw, {})
        self.assertEqual((s, h["Retry-After"]), ("429 Too Many Requests", "86400"))
        bare = srl.SysError(srl.SRL_ESYS, "SRL_ESYS", "no decision")
        mw = srl.wsgi.RateLimit(app, Failing(bare), key=lambda env: "k")
        with self.assertRaises(srl.SysError):
            self.call(mw, {})

    def test_empty_and_long_keys_are_answered_never_raised(self):
        # README's example exactly: the key is the X-Api-Key header.
        def app(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        lim = srl.Limiter.local("2/1d")
        mw = srl.wsgi.RateLimit(app, lim, key=lambda env: env.get("HTTP_X_API_KEY"))
        # An empty header (str or bytes): not limited, no headers, never a 500.
        for empty in ("", b""):
            for _ in range(3):
                s, h, b = self.call(mw, {"HTTP_X_API_KEY": empty})
                self.assertEqual((s, b), ("200 OK", b"ok"))
                self.assertNotIn("RateLimit", h)
        # Keys of 4096 bytes (as they are), 4097 and 5000 (fitted): limited,
        # and two that differ only in their last byte count apart.
        for n in (srl.KEY_MAX, srl.KEY_MAX + 1, 5000):
            a, b2 = "a" * (n - 1) + "x", "a" * (n - 1) + "y"
            got = [self.call(mw, {"HTTP_X_API_KEY": k})[0] for k in (a, a, b2, a, b2, b2)]
            self.assertEqual(got, ["200 OK", "200 OK", "200 OK", "429 Too Many Requests",
                                   "200 OK", "429 Too Many Requests"], n)
            # The count is the fitted key's, the one srl.key_fit names.
            self.assertFalse(lim.peek(srl.key_fit(a)).allowed)
        # A multibyte str over KEY_MAX bytes of UTF-8 (2000 chars, 6000 bytes).
        wide = "\u20ac" * 2000
        got = [self.call(mw, {"HTTP_X_API_KEY": wide})[0] for _ in range(3)]
        self.assertEqual(got, ["200 OK", "200 OK", "429 Too Many Requests"])
        self.assertFalse(lim.peek(srl.key_fit(wide)).allowed)

    def test_key_fit_is_srl_key_fit(self):
        import hashlib
        self.assertIsNone(srl.key_fit(""))
        self.assertIsNone(srl.key_fit(b""))
        for k in ("alice", b"alice", "k" * srl.KEY_MAX, b"k" * srl.KEY_MAX):
            self.assertIs(srl.key_fit(k), k)
        # The library's fixed vector (tests/check_keyfit.c): bytes i % 251.
        k = bytes(i % 251 for i in range(5000))
        f = srl.key_fit(k)
        self.assertEqual(len(f), srl.KEY_MAX)
        self.assertEqual(f[:srl.KEY_MAX - 32], k[:srl.KEY_MAX - 32])
        self.assertEqual(f[srl.KEY_MAX - 32:].hex(),
                         "380a35589ac0b8796076c76b284d2e0dd0842d3eac226475610946e0c2277b8b")
        self.assertEqual(f[srl.KEY_MAX - 32:], hashlib.blake2b(k, digest_size=32).digest())
        self.assertEqual(srl.key_fit(k.decode("latin-1").encode("latin-1")), f)
        self.assertEqual(srl.key_fit("é" * 3000), srl.key_fit(("é" * 3000).encode()))
        with self.assertRaises(TypeError):
            srl.key_fit(5)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[1:])
