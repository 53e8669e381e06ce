"""The srl storage for `limits` (srl.limits_storage) against limits 2.8's own
storage and strategy test expectations (tests/test_strategy.py and
tests/storage/test_memory.py of limits 2.8.0, those that need no frozen
clock: srl's windows run on the monotonic clock, which hiro cannot move; the
window's end is held by tests/check_algo_fixed_window.c at exact times), and
what only srl adds: one count for every process of the host.

Each test uses its own segment prefix and unlinks its segments (reset()).
Skipped (77) when python3-limits is not installed.
"""
import math
import os
import sys
import time
import unittest

try:
    from limits import RateLimitItemPerHour, RateLimitItemPerMinute, RateLimitItemPerSecond
    from limits.storage import storage_from_string
    from limits.strategies import (FixedWindowElasticExpiryRateLimiter,
                                   FixedWindowRateLimiter, MovingWindowRateLimiter)
except ImportError:
    print("python3-limits not installed: skipped")
    sys.exit(77)

import srl
import srl.limits_storage  # registers srl://


class LimitsStorage(unittest.TestCase):
    def setUp(self):
        self.prefix = "srl-test-lim-%d-%s" % (os.getpid(), self._testMethodName[-20:])
        self.storage = storage_from_string("srl:///" + self.prefix + "?capacity=64")

    def tearDown(self):
        self.storage.reset()
        left = [n for n in os.listdir("/dev/shm") if n.startswith(self.prefix + ".")]
        self.assertEqual(left, [])

    # -- limits 2.8 tests/test_strategy.py --------------------------------

    def test_fixed_window(self):
        limiter = FixedWindowRateLimiter(self.storage)
        limit = RateLimitItemPerSecond(10, 2)
        start = time.time()
        self.assertTrue(all([limiter.hit(limit) for _ in range(0, 10)]))
        self.assertFalse(limiter.hit(limit))
        self.assertEqual(limiter.get_window_stats(limit)[1], 0)
        # the window opened at the first hit, 2 s long
        self.assertIn(limiter.get_window_stats(limit)[0],
                      (math.floor(start + 2), math.floor(start + 2) + 1))

    def test_fixed_window_empty_stats(self):
        limiter = FixedWindowRateLimiter(self.storage)
        limit = RateLimitItemPerSecond(10, 2)
        self.assertEqual(limiter.get_window_stats(limit)[1], 10)
        now = int(time.time())
        self.assertIn(limiter.get_window_stats(limit)[0], (now, now + 1))

    def test_fixed_window_multiple_cost(self):
        limiter = FixedWindowRateLimiter(self.storage)
        limit = RateLimitItemPerMinute(10, 2)
        self.assertTrue(limiter.hit(limit, cost=5))
        self.assertEqual(limiter.get_window_stats(limit)[1], 5)

    def test_elastic_expiry_says_it_is_not_supported(self):
        limiter = FixedWindowElasticExpiryRateLimiter(self.storage)
        with self.assertRaises(NotImplementedError) as cm:
            limiter.hit(RateLimitItemPerSecond(10, 2))
        self.assertEqual(str(cm.exception), "srl: fixed-window-elastic-expiry is not supported "
                         "(use strategy fixed-window or moving-window)")

    def test_moving_window_empty_stats(self):
        limiter = MovingWindowRateLimiter(self.storage)
        limit = RateLimitItemPerSecond(10, 2)
        self.assertEqual(limiter.get_window_stats(limit)[1], 10)
        now = int(time.time() + 2)
        self.assertIn(limiter.get_window_stats(limit)[0], (now, now + 1))

    def test_moving_window_multiple_cost_and_stats(self):
        limiter = MovingWindowRateLimiter(self.storage)
        limit = RateLimitItemPerMinute(10)
        before = time.time()
        self.assertTrue(limiter.hit(limit, cost=5))
        self.assertTrue(all(limiter.hit(limit) for _ in range(5)))
        self.assertFalse(limiter.hit(limit))
        reset, remaining = limiter.get_window_stats(limit)
        self.assertEqual(remaining, 0)
        # reset = the newest entry's time + 60 (limits' memory storage's answer)
        self.assertGreaterEqual(reset, int(before) + 60)
        self.assertLessEqual(reset, int(time.time()) + 60)

    def test_moving_window_varying_cost(self):
        limiter = MovingWindowRateLimiter(self.storage)
        five_per_min = RateLimitItemPerMinute(5)
        limiter.hit(five_per_min, cost=5)
        self.assertFalse(limiter.hit(five_per_min, cost=2))
        limiter.clear(five_per_min)
        self.assertTrue(limiter.hit(five_per_min))

    def _test_then_hit(self, limiter_cls):
        limiter = limiter_cls(self.storage)
        limit = RateLimitItemPerHour(2, 1)
        self.assertTrue(limiter.hit(limit))
        self.assertTrue(limiter.test(limit))
        self.assertTrue(limiter.hit(limit))
        self.assertFalse(limiter.test(limit))
        self.assertFalse(limiter.hit(limit))

    def test_test_fixed_window(self):
        self._test_then_hit(FixedWindowRateLimiter)

    def test_test_moving_window(self):
        self._test_then_hit(MovingWindowRateLimiter)

    # -- limits 2.8 tests/storage/test_memory.py ---------------------------

    def test_in_memory(self):
        limiter = FixedWindowRateLimiter(self.storage)
        per_min = RateLimitItemPerMinute(10)
        for _ in range(0, 10):
            self.assertTrue(limiter.hit(per_min))
        self.assertFalse(limiter.hit(per_min))

    def _clear(self, limiter_cls):
        limiter = limiter_cls(self.storage)
        per_min = RateLimitItemPerMinute(1)
        limiter.hit(per_min)
        self.assertFalse(limiter.hit(per_min))
        limiter.clear(per_min)
        self.assertTrue(limiter.hit(per_min))

    def test_fixed_window_clear(self):
        self._clear(FixedWindowRateLimiter)

    def test_moving_window_clear(self):
        self._clear(MovingWindowRateLimiter)

    def test_reset(self):
        limiter = FixedWindowRateLimiter(self.storage)
        per_min = RateLimitItemPerMinute(10)
        for _ in range(0, 10):
            self.assertTrue(limiter.hit(per_min))
        self.assertFalse(limiter.hit(per_min))
        self.assertEqual(self.storage.reset(), 1)   # PREFIX.fw.60
        for _ in range(0, 10):
            self.assertTrue(limiter.hit(per_min))
        self.assertFalse(limiter.hit(per_min))

    # -- the storage API as limits' storages answer it ----------------------

    def test_incr_counts_every_hit_over_the_limit_too(self):
        s = self.storage
        self.assertEqual([s.incr("foo", 10) for _ in range(5)], [1, 2, 3, 4, 5])
        self.assertEqual(s.incr("foo", 10, amount=3), 8)
        self.assertEqual(s.get("foo"), 8)          # a plain key: found in PREFIX.fw.10
        self.assertEqual(s.get("bar"), 0)
        left = s.get_expiry("foo") - time.time()
        self.assertTrue(8 < left <= 10, left)
        s.clear("foo")
        self.assertEqual(s.get("foo"), 0)
        self.assertTrue(s.check())

    def test_bad_uri_names_what_to_write(self):
        with self.assertRaises(ValueError) as cm:
            storage_from_string("srl://")
        self.assertIn("use srl:///PREFIX", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            storage_from_string("srl:///x?capasity=3")
        self.assertIn("bad option 'capasity'", str(cm.exception))

    # -- what srl adds: one count for every process ---------------------------

    def _forked_hits(self, limiter_cls, n_procs=4, hits=10):
        """n_procs children, each hits 12/hour `hits` times (all start together,
        released by one pipe); returns the total admitted."""
        limit = RateLimitItemPerHour(12)
        go_r, go_w = os.pipe()
        pipes, pids = [], []
        for _ in range(n_procs):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                os.read(go_r, 1)
                limiter = limiter_cls(self.storage)
                ok = sum(1 for _ in range(hits) if limiter.hit(limit, "client"))
                os.write(w, b"%d" % ok)
                os._exit(0)
            os.close(w)
            pipes.append(r)
            pids.append(pid)
        os.write(go_w, b"x" * n_procs)
        total = 0
        for r, pid in zip(pipes, pids):
            total += int(os.read(r, 16))
            os.close(r)
            self.assertEqual(os.waitpid(pid, 0)[1], 0)
        os.close(go_r)
        os.close(go_w)
        return total

    def test_four_processes_share_one_fixed_window(self):
        self.assertEqual(self._forked_hits(FixedWindowRateLimiter), 12)
        self.assertEqual(FixedWindowRateLimiter(self.storage).get_window_stats(
            RateLimitItemPerHour(12), "client")[1], 0)

    def test_four_processes_share_one_moving_window(self):
        self.assertEqual(self._forked_hits(MovingWindowRateLimiter), 12)
        self.assertEqual(MovingWindowRateLimiter(self.storage).get_window_stats(
            RateLimitItemPerHour(12), "client")[1], 0)


if __name__ == "__main__":
    unittest.main()
