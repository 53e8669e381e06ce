#!/usr/bin/python3
"""metrics_text.py - `rlctl metrics` read by real Prometheus parsers.

Makes two segments, drives a known number of decisions through `rlctl try`
(one on_full deny, one allow, both filled past capacity), then checks the
text three ways: `promtool check metrics` accepts it with no lint
complaint, prometheus_client's parser reads it, and every number equals
the one computed here and the one `rlctl info --json` (srl_stats) reports.
Also --output: written whole, mode 0644, by rename (no temporary file left
behind), and left alone when it cannot be written.

Needs promtool (Debian: prometheus) and python3-prometheus-client: both in
tools/install-deps; a missing one is a failure, not a skip.
Run by Debian's /usr/bin/python3 (the package's interpreter), RLCTL from
the environment (tests/rlctl/meson.build).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlctl_check  # noqa: E402
from rlctl_check import check  # noqa: E402

PROMTOOL = shutil.which("promtool")


def rlctl(*args):
    p = rlctl_check.rlctl(*args)
    return p.returncode, p.stdout, p.stderr


def parse(text):
    """{(sample name, frozenset(labels)): value}, and {family: type}."""
    samples, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def value(samples, name, seg, **labels):
    labels["segment"] = seg
    return samples.get((name, frozenset(labels.items())))


def promtool_ok(text, what):
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True)
    check(p.returncode == 0 and p.stdout.strip() == "" and p.stderr.strip() == "",
          "promtool check metrics on %s: rc %d: %s%s" % (what, p.returncode, p.stdout,
                                                       p.stderr))


def main():
    if PROMTOOL is None:
        print("FAIL: promtool not found: run tools/install-deps (Debian package prometheus)")
        return 1
    pid = os.getpid()
    deny, allow = "/rlctl-metrics-deny-%d" % pid, "/rlctl-metrics-allow-%d" % pid
    missing = "/rlctl-metrics-missing-%d" % pid
    compound = "/rlctl-metrics-compound-%d" % pid
    try:
        for name, on_full in ((deny, "deny"), (allow, "allow")):
            rc, out, err = rlctl("create", name, "--policy", "token_bucket:3/1h",
                                 "--capacity", "16", "--on-full", on_full)
            check(rc == 0, "create %s: %s" % (name, err))
        # deny: 16 keys once (16 allowed), k1 four more times (2 allowed,
        # 2 denied), 5 new keys on the full table (5 untracked, denied).
        for i in range(1, 17):
            rlctl("try", deny, "k%d" % i)
        for _ in range(4):
            rlctl("try", deny, "k1")
        for i in range(17, 22):
            rc, out, _ = rlctl("try", deny, "k%d" % i)
            check(rc == 1, "try on the full deny table is denied (rc %d)" % rc)
        # allow: 17 keys once: 16 allowed by their state, 1 untracked.
        for i in range(1, 18):
            rlctl("try", allow, "k%d" % i)

        rc, text, err = rlctl("metrics", deny, allow)
        check(rc == 0 and err == "", "metrics rc %d: %s" % (rc, err))
        promtool_ok(text, "two segments")
        samples, types = parse(text)
        check(types.get("srl_decisions") == "counter", "srl_decisions_total is a counter")
        for fam in ("srl_keys", "srl_capacity_keys", "srl_table_load_ratio",
                    "srl_segment_bytes", "srl_segment_up"):
            check(types.get(fam) == "gauge", "%s is a gauge" % fam)
        for fam in ("srl_recovered", "srl_evicted", "srl_lock_timeouts", "srl_reset_slots"):
            check(types.get(fam) == "counter", "%s_total is a counter" % fam)

        want = {deny: {"allowed": 18, "denied": 2, "untracked": 5, "degraded": 0},
                allow: {"allowed": 16, "denied": 0, "untracked": 1, "degraded": 0}}
        for seg, results in want.items():
            for result, n in results.items():
                got = value(samples, "srl_decisions_total", seg, result=result)
                check(got == n, "%s result=%s: %r, want %d" % (seg, result, got, n))
            rc, out, _ = rlctl("info", seg, "--json")
            info = json.loads(out)
            # Cross-check with srl_stats: the library counts untracked
            # decisions in allowed or denied too, by on_full.
            full_in = "denied" if info["on_full"] == "deny" else "allowed"
            for result in ("allowed", "denied"):
                extra = results["untracked"] if result == full_in else 0
                check(info[result] == results[result] + extra,
                      "%s srl_stats.%s %d vs metrics %d + %d" % (seg, result, info[result],
                                                                 results[result], extra))
            check(info["full"] == results["untracked"], "%s srl_stats.full" % seg)
            check(value(samples, "srl_keys", seg) == info["used"] == 16, "%s keys" % seg)
            check(value(samples, "srl_capacity_keys", seg) == info["capacity"] == 16,
                  "%s capacity" % seg)
            check(value(samples, "srl_table_load_ratio", seg) == 1.0, "%s load" % seg)
            check(value(samples, "srl_segment_bytes", seg) == info["segment_bytes"],
                  "%s bytes" % seg)
            check(value(samples, "srl_policy_permits", seg, limit="0") == 3, "%s permits" % seg)
            check(value(samples, "srl_policy_window_seconds", seg, limit="0") == 3600,
                  "%s window" % seg)
            check(abs(value(samples, "srl_segment_created_timestamp_seconds", seg)
                      - info["created_unix_ns"] / 1e9) < 1e-3, "%s created" % seg)
            check(value(samples, "srl_segment_up", seg, status="ok") == 1, "%s up" % seg)
            check(value(samples, "srl_segment_info", seg, policy="token_bucket:3/1h",
                        algorithm="token_bucket", on_full=info["on_full"]) == 1,
                  "%s info" % seg)
            for fam in ("srl_recovered_total", "srl_evicted_total",
                        "srl_lock_timeouts_total", "srl_reset_slots_total"):
                check(value(samples, fam, seg) == 0, "%s %s" % (seg, fam))

        # No NAME: every segment of the host, ours among them.
        rc, text_all, err = rlctl("metrics")
        check(rc == 0, "metrics (no NAME) rc %d: %s" % (rc, err))
        promtool_ok(text_all, "every segment")
        s_all, _ = parse(text_all)
        for seg in (deny, allow):
            check(value(s_all, "srl_decisions_total", seg, result="untracked")
                  == want[seg]["untracked"], "no-NAME listing has %s" % seg)

        # A missing segment: up 0 with its status, the others still there,
        # the reason on stderr, exit 66 (EX_NOINPUT).
        rc, text_m, err = rlctl("metrics", deny, missing)
        check(rc == 66, "missing segment: rc %d, want 66" % rc)
        check(missing in err and "no such segment" in err, "missing: stderr %r" % err)
        promtool_ok(text_m, "a missing segment")
        s_m, _ = parse(text_m)
        check(value(s_m, "srl_segment_up", missing, status="missing") == 0, "missing up 0")
        check(value(s_m, "srl_keys", missing) is None, "no srl_keys for the missing one")
        check(value(s_m, "srl_keys", deny) == 16, "the readable one is still there")

        # --output: atomic replace, 0644, nothing left beside it.
        d = tempfile.mkdtemp(prefix="rlctl-metrics-")
        try:
            path = os.path.join(d, "srl.prom")
            with open(path, "w") as f:
                f.write("old\n")
            old_ino = os.stat(path).st_ino
            rc, out, err = rlctl("metrics", deny, allow, "--output", path)
            check(rc == 0 and out == "" and err == "", "--output rc %d %r %r" % (rc, out, err))
            with open(path) as f:
                check(f.read() == text, "--output holds exactly what stdout showed")
            st = os.stat(path)
            check(st.st_ino != old_ino, "--output replaced the file by rename")
            check(st.st_mode & 0o777 == 0o644, "--output mode %o" % (st.st_mode & 0o777))
            check(os.listdir(d) == ["srl.prom"], "left beside it: %r" % os.listdir(d))
            bad = os.path.join(d, "no-such-dir", "srl.prom")
            rc, out, err = rlctl("metrics", deny, "--output", bad)
            check(rc == 73 and "no-such-dir" in err, "--output to a missing dir: rc %d %r"
                  % (rc, err))
            check(os.listdir(d) == ["srl.prom"], "a failed --output leaves nothing")
        finally:
            shutil.rmtree(d)

        # A compound: one permits and one window sample per limit, by index.
        rc, _, err = rlctl("create", compound, "--policy", "token_bucket:3/1h + concurrency:2",
                           "--capacity", "16")
        check(rc == 0, "create %s: %s" % (compound, err))
        rc, text_c, err = rlctl("metrics", compound)
        promtool_ok(text_c, "a compound")
        s_c, _ = parse(text_c)
        check([value(s_c, "srl_policy_permits", compound, limit=i) for i in ("0", "1", "2")]
              == [3, 2, None], "compound permits per limit")
        check([value(s_c, "srl_policy_window_seconds", compound, limit=i) for i in ("0", "1")]
              == [3600, 0], "compound windows per limit (max_hold 0: none)")
        check(value(s_c, "srl_reclaimed_total", compound) == 0, "reclaimed counter")
        check(value(s_c, "srl_inflight_units", compound) == 0, "nothing in flight yet")
        # A worker holds 2 units of one key: the in-flight gauge says 2; a
        # segment without a concurrency limit has no such sample.
        holder = subprocess.Popen([os.environ["RLCTL_WORKER"], compound, "hold", "2", "6b"],
                                  stdout=subprocess.PIPE)
        try:
            check(holder.stdout.readline() == b"held\n", "the holder did not enter")
            rc, text_h, err = rlctl("metrics", compound, deny)
            promtool_ok(text_h, "with units in flight")
            s_h, _ = parse(text_h)
            check(value(s_h, "srl_inflight_units", compound) == 2, "2 units in flight")
            check(value(s_h, "srl_inflight_units", deny) is None,
                  "no in-flight gauge without a concurrency limit")
        finally:
            holder.kill()
            holder.wait()

        rc, _, err = rlctl("metrics", deny, "--all")
        check(rc == 64 and "not both" in err, "NAME with --all: rc %d %r" % (rc, err))
    finally:
        for name in (deny, allow, compound):
            rlctl("destroy", name)
    return rlctl_check.summary("metrics_text")


if __name__ == "__main__":
    sys.exit(main())
