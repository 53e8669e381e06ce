#!/usr/bin/python3
"""watch_tty.py - `rlctl watch` on a real terminal: a tmux pane.

tmux gives rlctl a pseudo-terminal; capture-pane reads what is on the
screen and display-message reads the terminal's modes.  Checked:
  - the first row is on the screen at once (-i 3600: no second row could
    come during the test), in the alternate screen, cursor hidden;
  - Ctrl-C (send-keys C-c) ends it with status 0, and the terminal is
    restored: normal screen, cursor shown, the watch screen gone;
  - destroy + create of the name while watching: it says "was recreated",
    the rows that follow show the new segment's counters and the title its
    policy (another one than the first segment's);
  - not a terminal: -i 0.5 stamps rows HH:MM:SS.mmm (two rows, two
    stamps), -i 1 HH:MM:SS; --json's t_ns is 0 in the first row and the
    monotonic time since it after (at least the interval: rows wait for
    absolute deadlines), equal to interval_ns in the second.
Every wait polls for a condition, with a generous deadline (a failure, not
a pass, when it runs out).  Needs tmux (tools/install-deps).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlctl_check  # noqa: E402
from rlctl_check import RLCTL, check, rlctl  # noqa: E402

SOCK = "rlctl-watch-%d" % os.getpid()
def tmux(*args):
    return subprocess.run(["tmux", "-L", SOCK, "-f", "/dev/null", *args], capture_output=True,
                          text=True)


def screen(target):
    return tmux("capture-pane", "-p", "-t", target).stdout


def mode(target, fmt):
    return tmux("display-message", "-p", "-t", target, fmt).stdout.strip()


def wait_for(what, cond, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return check(False, "timed out waiting for " + what)


def start(session, name, interval):
    cmd = "%s watch %s -i %s; echo EXIT=$?; exec sleep 600" % (RLCTL, name, interval)
    r = tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "30", cmd)
    check(r.returncode == 0, "tmux new-session: %s" % r.stderr)


def row_with(text, totals):
    """A watch row whose ALLOWED, DENIED totals are totals."""
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].count(":") == 2 and (f[6], f[7]) == totals:
            return True
    return False


def main():
    if shutil.which("tmux") is None:
        print("FAIL: tmux not found: run tools/install-deps")
        return 1
    name = "/rlctl-watch-tty-%d" % os.getpid()
    try:
        check(rlctl("create", name, "--policy", "token_bucket:5/1h", "--capacity", "16")
              .returncode == 0, "create")
        for _ in range(7):  # 5 allowed, 2 denied
            rlctl("try", name, "k")

        # 1. First row at once, full screen, Ctrl-C restores the terminal.
        start("a", name, "3600")
        wait_for("the first row", lambda: row_with(screen("a"), ("5", "2")))
        s = screen("a")
        check("rlctl watch %s: token_bucket:5/1h" % name in s, "title line: %r" % s)
        check("ALLOWED/s" in s and "RESET" in s and "EVICTED" in s, "header: %r" % s)
        check(mode("a", "#{alternate_on}") == "1", "watch runs in the alternate screen")
        check(mode("a", "#{cursor_flag}") == "0", "cursor hidden while watching")
        tmux("send-keys", "-t", "a", "C-c")
        wait_for("exit after Ctrl-C", lambda: "EXIT=" in screen("a"))
        s = screen("a")
        check("EXIT=0" in s, "Ctrl-C: exit status 0: %r" % s)
        check("ALLOWED/s" not in s, "the watch screen is gone after Ctrl-C: %r" % s)
        check(mode("a", "#{alternate_on}") == "0", "normal screen restored")
        check(mode("a", "#{cursor_flag}") == "1", "cursor shown again")

        # 2. Destroy + create under the same name: it follows the new one.
        start("b", name, "0.1")
        wait_for("the first row (b)", lambda: row_with(screen("b"), ("5", "2")))
        check(rlctl("destroy", name).returncode == 0, "destroy")
        check(rlctl("create", name, "--policy", "token_bucket:7/1h", "--capacity", "16")
              .returncode == 0, "create again")
        rlctl("try", name, "new")
        wait_for("'was recreated'", lambda: "%s was recreated" % name in screen("b"))
        wait_for("a row of the new segment", lambda: row_with(
            screen("b").split("was recreated")[-1], ("1", "0")))
        s = screen("b")
        check("rlctl watch %s: token_bucket:7/1h" % name in s
              and "token_bucket:5/1h" not in s, "the title names the new policy: %r" % s)
        tmux("send-keys", "-t", "b", "C-c")
        wait_for("exit after Ctrl-C (b)", lambda: "EXIT=0" in screen("b"))

        # 3. Not a terminal: the stamps follow the interval; t_ns.
        r = rlctl("watch", name, "-i", "0.5", "-n", "2")
        rows = r.stdout.splitlines()[1:]
        stamps = [ln.split()[0] for ln in rows]
        check(r.returncode == 0 and len(rows) == 2 and
              all(re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", t) for t in stamps) and
              stamps[0] != stamps[1], "-i 0.5 stamps with milliseconds: %r" % r.stdout)
        r = rlctl("watch", name, "-i", "1", "-n", "1")
        rows = r.stdout.splitlines()[1:]
        check(r.returncode == 0 and len(rows) == 1 and
              re.fullmatch(r"\d\d:\d\d:\d\d", rows[0].split()[0]) is not None,
              "-i 1 stamps whole seconds: %r" % r.stdout)
        r = rlctl("watch", name, "-i", "0.01", "-n", "2", "--json")
        objs = [json.loads(ln) for ln in r.stdout.splitlines()]
        check(len(objs) == 2 and objs[0]["t_ns"] == 0 and objs[1]["t_ns"] >= 10000000 and
              objs[1]["t_ns"] == objs[1]["interval_ns"], "t_ns: %r" % r.stdout)
    finally:
        tmux("kill-server")
        rlctl("destroy", name)
    return rlctl_check.summary("watch_tty")


if __name__ == "__main__":
    sys.exit(main())
