#!/usr/bin/python3
"""json_fields.py - the man page's JSON FIELDS section against what rlctl prints.

Every command is run with --json on a live segment (and the failure object
on a missing one); every field name of its output, nested ones included,
must be in that command's paragraph of rlctl.1's JSON FIELDS section
(written \\fBfield\\fR), and every field the paragraph names must appear in
at least one of the command's outputs.  So a field added, renamed or
dropped without the man page fails here.  The conditional fields are
provoked: a tracked and an untracked key for get, a dry and a real evict,
a foreign object for ls --all (its "error"), ls with and without --keys.
Only "list refused" is not (it needs 100001 keys): check_rlctl_walks
asserts each of its fields.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlctl_check  # noqa: E402
from rlctl_check import check, rlctl  # noqa: E402

MAN = os.environ["RLCTL_MAN"]


def documented():
    """{label: set of field names} from the JSON FIELDS section."""
    text = open(MAN).read()
    sec = text.split(".SH JSON FIELDS\n", 1)[1].split("\n.SH ", 1)[0]
    out = {}
    for para in sec.split(".TP\n")[1:]:
        label, body = para.split("\n", 1)
        out[label] = set(re.findall(r"\\fB([a-z_0-9]+)\\fR", body))
    return out


def keys_of(v, acc):
    if isinstance(v, dict):
        for k, x in v.items():
            acc.add(k)
            keys_of(x, acc)
    elif isinstance(v, list):
        for x in v:
            keys_of(x, acc)
    return acc


def outputs(*args, lines=False):
    r = rlctl(*args)
    text = r.stdout.strip()
    check(text != "", "rlctl %s --json printed nothing (exit %d): %s" % (args, r.returncode,
                                                                         r.stderr))
    objs = [json.loads(t) for t in text.splitlines()] if lines else [json.loads(text)]
    acc = set()
    for o in objs:
        check(next(iter(o)) == "schema_version", "%s: schema_version is not first" % (args,))
        keys_of(o, acc)
    acc.discard("schema_version")
    return acc


def main():
    doc = documented()
    pid = os.getpid()
    name = "/rlctl-json-fields-%d" % pid
    units = "/rlctl-json-units-%d" % pid
    tiered = "/rlctl-json-tiers-%d" % pid
    foreign = "/dev/shm/rlctl-json-foreign-%d" % pid
    seen = {}

    def add(label, fields):
        seen.setdefault(label, set()).update(fields)

    try:
        add(".B create", outputs("create", name, "--policy", "token_bucket:5/1h",
                                 "--capacity", "64", "--key-display", "8", "--json"))
        rlctl("create", units, "--policy", "concurrency:2 + token_bucket:5/1h", "--capacity", "64")
        add(".B create", outputs("create", tiered, "--policy", "token_bucket:5/1h",
                                 "--capacity", "64", "--tier", "paid=token_bucket:9/1h", "--json"))
        add(".B info", outputs("info", tiered, "--json"))
        add('.BR get ", " try', outputs("get", tiered, "k", "--tier", "paid", "--json"))
        add(".B set\\-policy", outputs("set-policy", tiered, "paid=token_bucket:12/1h", "--json"))
        add(".B set\\-policy", outputs("set-policy", tiered, "paid=token_bucket:12/1h", "--json"))
        add("set\\-policy refused", outputs("set-policy", tiered, "sliding_log:90/1h", "--json"))
        rlctl("try", name, "k")
        with open(foreign, "wb") as f:
            f.write(b"not an srl segment" * 10)
        add(".B ls", outputs("ls", "--json"))
        add(".B ls", outputs("ls", "--keys", "--all", "--json"))
        add(".B info", outputs("info", name, "--json"))
        add(".B list", outputs("list", name, "--json"))
        for key in ("k", "new"):
            add('.BR get ", " try', outputs("get", name, key, "--json"))
        add('.BR get ", " try', outputs("try", name, "k", "--json"))
        add(".B reset", outputs("reset", name, "k", "--json"))
        add(".B set\\-key", outputs("set-key", name, "own", "token_bucket:3/1h", "--json"))
        add('.BR get ", " try', outputs("get", name, "own", "--json"))
        add(".B clear\\-key", outputs("clear-key", name, "own", "--json"))
        add(".B exempt", outputs("exempt", name, "ex", "--json"))
        add(".B unexempt", outputs("unexempt", name, "ex", "--json"))
        add(".B ban", outputs("ban", name, "bn", "--for", "1h", "--reason", "r", "--json"))
        add(".B unban", outputs("unban", name, "bn", "--json"))
        add(".B evict", outputs("evict", name, "--dry-run", "--json"))
        add(".B evict", outputs("evict", name, "--json"))
        add(".B check", outputs("check", name, "--json"))
        add(".B watch", outputs("watch", name, "-i", "0.01", "-n", "2", "--json", lines=True))
        # A unit limit with a rate limit, one unit held by a live worker:
        # get's "limits" (with holders) and info's "reclaimed".
        holder = subprocess.Popen([os.environ["RLCTL_WORKER"], units, "hold", "1", "6b"],
                                  stdout=subprocess.PIPE)
        check(holder.stdout.readline() == b"held\n", "the holder did not enter")
        add(".B info", outputs("info", units, "--json"))
        add('.BR get ", " try', outputs("get", units, "k", "--json"))
        add(".B list", outputs("list", units, "--json"))
        r = rlctl("list", units)
        check("INFLIGHT" in r.stdout.splitlines()[0] and r.stdout.splitlines()[1].split()[-1] == "1",
              "list on a concurrency policy shows the unit in flight:\n" + r.stdout)
        holder.kill()
        holder.wait()
        add(".B destroy", outputs("destroy", name, "--json"))
        add("any failure", outputs("info", name, "--json"))
    finally:
        rlctl("destroy", name)
        rlctl("destroy", units)
        rlctl("destroy", tiered)
        if os.path.exists(foreign):
            os.unlink(foreign)

    for label, fields in sorted(seen.items()):
        check(label in doc, "no paragraph %r in JSON FIELDS" % label)
        want = doc.get(label, set())
        for f in sorted(fields - want):
            check(False, "%s prints %r, which JSON FIELDS does not name" % (label, f))
        missing = want - fields
        for f in sorted(missing):
            check(False, "JSON FIELDS names %r under %s, which it never printed" % (f, label))
    # "list refused" needs 100001 keys: check_rlctl_walks asserts its fields.
    check(set(doc) == set(seen) | {"list refused"},
          "paragraphs %s vs outputs %s" % (sorted(doc), sorted(seen)))
    return rlctl_check.summary("json_fields")


if __name__ == "__main__":
    sys.exit(main())
