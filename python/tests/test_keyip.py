"""test_keyip.py - srl.ip_key, srl.cidr, srl.cidr_match and srl.wsgi's
exempt= (suite 'python'), run by meson test.

Exact key texts (the bytes mod_srl, nginx and PHP make: srl_key_ip), exact
ValueError messages, and the middleware called directly with environ dicts
on an anonymous limiter with a day-long window: exempt addresses are never
refused and counted exactly in stats()["exempt"], the rest are limited, an
address prefix key makes a /24 one client.  Nothing here is timed.
"""
import sys
import unittest

import srl
import srl.wsgi


class TestIpKey(unittest.TestCase):
    def test_exact_keys(self):
        cases = [
            (("192.0.2.1",), "192.0.2.1/32"),
            (("192.0.2.1", 24), "192.0.2.0/24"),
            (("192.0.2.1", 0), "0.0.0.0/0"),
            (("2001:db8:1:2:3:4:5:6",), "2001:db8:1:2::/64"),
            (("2001:db8:1:2:3:4:5:6", 32, 128), "2001:db8:1:2:3:4:5:6/128"),
            (("2001:db8:1:2:3:4:5:6", 32, 0), "::/0"),
            (("::ffff:192.0.2.1", 24, 64), "192.0.2.0/24"),   # mapped: IPv4
            (("2001:0DB8:0:0:1:0:0:1", 32, 128), "2001:db8::1:0:0:1/128"),
        ]
        for args, want in cases:
            self.assertEqual(srl.ip_key(*args), want, args)
        self.assertEqual(srl.ip_key("10.1.2.3", v4=8), "10.0.0.0/8")
        self.assertEqual(srl.ip_key("2001:db8::1", v6=48), "2001:db8::/48")

    def test_bad_addresses_and_prefixes_are_value_errors(self):
        for bad in ("", "1.2.3", "01.2.3.4", "[::1]", "::1%lo", "1.2.3.4:80", "10.0.0.0/8"):
            with self.assertRaises(ValueError) as cm:
                srl.ip_key(bad)
            self.assertEqual(str(cm.exception), "ip_key: '%s' is not an IPv4 or IPv6 address "
                             "(dotted quad or RFC 4291 text; no port, brackets or zone)" % bad)
        with self.assertRaises(ValueError) as cm:
            srl.ip_key("1.2.3.4", 33)
        self.assertEqual(str(cm.exception),
                         "ip_key: prefixes are v4 0..32 and v6 0..128, not v4=33 v6=64")
        with self.assertRaises(ValueError):
            srl.ip_key("::1", 32, 129)

    def test_cidr_and_match(self):
        self.assertEqual(srl.cidr("10.0.0.0/8"), "10.0.0.0/8")
        self.assertEqual(srl.cidr("::1"), "::1/128")
        self.assertEqual(srl.cidr("2001:DB8::/32"), "2001:db8::/32")
        self.assertEqual(srl.cidr("::ffff:10.0.0.0/104"), "10.0.0.0/8")
        for bad in ("10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/08", "", "x"):
            with self.assertRaises(ValueError) as cm:
                srl.cidr(bad)
            self.assertEqual(str(cm.exception), "'%s' is not an address range: give ADDRESS or "
                             "ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the address "
                             "with no bits set past the prefix" % bad)
        table = [("10.0.0.0/8", "10.255.0.1", True), ("10.0.0.0/8", "11.0.0.1", False),
                 ("10.0.0.0/8", "::ffff:10.1.1.1", True), ("::1", "::1", True),
                 ("::1", "127.0.0.1", False), ("::/0", "1.2.3.4", False),
                 ("10.0.0.0/8", "not an address", False)]
        for r, a, want in table:
            self.assertIs(srl.cidr_match(r, a), want, (r, a))


class TestWsgiExempt(unittest.TestCase):
    def call(self, mw, addr):
        got = {}

        def start_response(status, headers, exc_info=None):
            got["status"] = status
        b"".join(mw({"REMOTE_ADDR": addr}, start_response))
        return got["status"]

    @staticmethod
    def app(environ, start_response):
        start_response("200 OK", [])
        return [b"ok"]

    def test_exempt_ranges_are_never_refused_and_counted(self):
        lim = srl.Limiter.anonymous("2/1d", capacity=64)
        mw = srl.wsgi.RateLimit(self.app, lim, exempt=["127.0.0.0/8", "::1"])
        for addr in ("127.0.0.1", "127.0.0.2", "::ffff:127.9.9.9", "::1"):
            got = [self.call(mw, addr) for _ in range(5)]
            self.assertEqual(got, ["200 OK"] * 5, addr)
        st = lim.stats()
        self.assertEqual((st["allowed"], st["denied"], st["exempt"]), (20, 0, 20))
        # Decided under the ranges' keys; the clients' own keys untouched.
        self.assertFalse(lim.reset("127.0.0.1"))
        # Outside the ranges: the limit.
        got = [self.call(mw, "192.0.2.1") for _ in range(3)]
        self.assertEqual(got, ["200 OK", "200 OK", "429 Too Many Requests"])
        got = [self.call(mw, "::2") for _ in range(3)]
        self.assertEqual(got, ["200 OK", "200 OK", "429 Too Many Requests"])
        st = lim.stats()
        self.assertEqual((st["allowed"], st["denied"], st["exempt"]), (24, 2, 20))

    def test_without_exempt_the_same_addresses_are_limited(self):
        lim = srl.Limiter.anonymous("2/1d", capacity=64)
        mw = srl.wsgi.RateLimit(self.app, lim)
        got = [self.call(mw, "127.0.0.1") for _ in range(3)]
        self.assertEqual(got, ["200 OK", "200 OK", "429 Too Many Requests"])
        self.assertEqual(lim.stats()["exempt"], 0)

    def test_a_bad_range_is_refused_at_construction(self):
        with self.assertRaises(ValueError) as cm:
            srl.wsgi.RateLimit(self.app, srl.Limiter.local("2/1d"), exempt=["10.0.0.1/8"])
        self.assertIn("'10.0.0.1/8' is not an address range", str(cm.exception))

    def test_the_in_process_store_keeps_exemptions_too(self):
        lim = srl.Limiter.local("1/1d")
        mw = srl.wsgi.RateLimit(self.app, lim, exempt=["127.0.0.0/8"])
        self.assertEqual([self.call(mw, "127.0.0.1") for _ in range(3)], ["200 OK"] * 3)
        st = lim.stats()
        self.assertEqual((st["allowed"], st["exempt"]), (3, 3))
        self.assertEqual([self.call(mw, "192.0.2.1") for _ in range(2)],
                         ["200 OK", "429 Too Many Requests"])

    def test_prefix_keys_make_a_24_one_client(self):
        lim = srl.Limiter.anonymous("3/1d", capacity=64)
        mw = srl.wsgi.RateLimit(self.app, lim,
                                key=lambda env: srl.ip_key(env["REMOTE_ADDR"], 24, 64))
        got = [self.call(mw, a) for a in ("192.0.2.1", "192.0.2.2", "::ffff:192.0.2.3",
                                           "192.0.2.4", "192.0.3.1")]
        self.assertEqual(got, ["200 OK"] * 3 + ["429 Too Many Requests", "200 OK"])
        got = [self.call(mw, a) for a in ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9",
                                           "2001:db8:1:2::3", "2001:db8:1:2::4")]
        self.assertEqual(got, ["200 OK"] * 3 + ["429 Too Many Requests"])
        self.assertFalse(lim.peek("2001:db8:1:2::/64").allowed)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[1:])
