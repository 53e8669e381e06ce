"""test_ban_log.py - the log line of a ban's start (issue 41 item 4), suite 'python'.

A penalty= ban started by acquire() is logged once on the logger "srl", at
srl.ban_log_level, with the key's display form, the policy text and until
when (UTC, whole seconds: now + the decision's retry_after, rounded up).
The denials during the ban log nothing; a raw bytes key is escaped; a level
is chosen; None turns it off.
The windows are an hour or more, so nothing refills during a test.
"""
import datetime
import logging
import time
import unittest

import srl

POLICY = "token_bucket:1/1s,penalty=1h..1d"


def until_of(line):
    text = line.rsplit("until ", 1)[1]
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


class BanLog(unittest.TestCase):
    def setUp(self):
        self.lim = srl.Limiter.local(POLICY)
        srl.ban_log_level = logging.WARNING

    def tearDown(self):
        srl.ban_log_level = logging.WARNING
        self.lim.close()

    def offend(self, key):
        d = self.lim.acquire(key)
        self.assertTrue(d.allowed)
        self.assertFalse(d.flags & srl.FLAG_BAN_STARTED)
        before = time.time()
        d = self.lim.acquire(key)
        after = time.time()
        self.assertFalse(d.allowed)
        self.assertEqual(d.flags & srl.FLAG_BAN_STARTED, srl.FLAG_BAN_STARTED)
        return d, before, after

    def test_one_line_per_ban_start_with_key_policy_and_until(self):
        with self.assertLogs("srl", level="WARNING") as cm:
            d, before, after = self.offend("alice")
            for _ in range(20):   # denied during the ban: nothing more is logged
                self.assertFalse(self.lim.acquire("alice").allowed)
        self.assertEqual(len(cm.records), 1, cm.output)
        r = cm.records[0]
        self.assertEqual(r.name, "srl")
        self.assertEqual(r.levelno, logging.WARNING)
        msg = r.getMessage()
        self.assertTrue(msg.startswith("ban started: key alice, policy %s, until " % POLICY), msg)
        self.assertEqual(d.retry_after_ns, 3600 * 10**9)
        until = until_of(msg)
        self.assertGreaterEqual(until, before + 3600 - 1)
        self.assertLessEqual(until, after + 3600 + 1)

    def test_an_escaped_key_and_a_level_chosen_or_none(self):
        srl.ban_log_level = logging.ERROR
        with self.assertLogs("srl", level="ERROR") as cm:
            self.offend(b"\x1b[31m\xffbob\n")
        self.assertEqual(len(cm.records), 1, cm.output)
        self.assertEqual(cm.records[0].levelno, logging.ERROR)
        self.assertIn("key \\x1b[31m\\xffbob\\x0a, policy", cm.records[0].getMessage())
        srl.ban_log_level = None
        logger = logging.getLogger("srl")
        seen = []
        h = logging.Handler()
        h.emit = seen.append
        logger.addHandler(h)
        try:
            self.offend("carol")
        finally:
            logger.removeHandler(h)
        self.assertEqual(seen, [])


if __name__ == "__main__":
    unittest.main()
