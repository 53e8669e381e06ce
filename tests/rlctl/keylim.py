#!/usr/bin/env python3
"""keylim.py - rlctl set-key and clear-key (a key's own limits), and what
get and list then show, on a real segment: exact texts, JSON and exit
statuses.  RLCTL names the binary (tests/rlctl/meson.build)."""
import json
import os
import subprocess
import sys

RLCTL = os.environ["RLCTL"]
NAME = "/srl-test-%d-keylim" % os.getpid()
failures = []


def run(*args):
    p = subprocess.run([RLCTL, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def expect(what, got, want):
    if got != want:
        failures.append("%s:\n  got  %r\n  want %r" % (what, got, want))


try:
    expect("create", run("create", NAME, "--policy", "token_bucket:100/1h", "--capacity", "64")[0], 0)
    expect("try", run("try", NAME, "alice")[0], 0)
    expect("set-key", run("set-key", NAME, "alice", "token_bucket:3/1h"),
           (0, "alice: decided by its own limits token_bucket:3/1h (its use kept)\n", ""))
    # One use of 100 is one use of 3: a request now leaves 1.
    rc, out, _ = run("try", NAME, "alice")
    expect("try after set-key", (rc, out), (0, "alice: allowed, remaining 1 of 3\n"))
    rc, out, _ = run("get", NAME, "alice")
    expect("get shows the own limits", out.splitlines()[1:],
           ["  decided by its own limits: token_bucket:3/1h (rlctl clear-key drops them)"])
    rc, out, _ = run("get", NAME, "alice", "--json")
    expect("get --json own_limits", json.loads(out).get("own_limits"), "token_bucket:3/1h")
    rc, out, _ = run("list", NAME, "--json")
    keys = json.loads(out)["keys"]
    expect("list --json own_limits", sorted(k["own_limits"] for k in keys), [True])
    expect("set-key too big", run("set-key", NAME, "bob", "sliding_log:50/1m"),
           (64, "", "rlctl: %s: invalid rate-limit policy: the key's limits need a state of 408 "
            "bytes; this segment's slots hold at most 24 (its largest state): create the "
            "segment with that policy in a tier\n" % NAME))
    expect("set-key bad policy", run("set-key", NAME, "bob", "token_bukket:3/1h")[0], 64)
    expect("set-key no policy", run("set-key", NAME, "bob")[2].splitlines()[0],
           "rlctl: set-key: missing POLICY")
    expect("clear-key", run("clear-key", NAME, "alice"),
           (0, "alice: own limits cleared (its tier decides it again, its use kept)\n", ""))
    rc, out, _ = run("try", NAME, "alice")
    expect("try after clear-key", (rc, out), (0, "alice: allowed, remaining 97 of 100\n"))
    expect("clear-key untracked", run("clear-key", NAME, "nobody"),
           (1, "nobody: not tracked (nothing to clear)\n", ""))
    rc, out, _ = run("clear-key", NAME, "alice", "--json")
    expect("clear-key --json", json.loads(out)["cleared"], True)
finally:
    run("destroy", NAME)

for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
