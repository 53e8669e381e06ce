"""rlctl_check.py - what the Python rlctl tests share: counted checks and
running $RLCTL.  Imported from the tests' own directory."""
import os
import subprocess

RLCTL = os.environ["RLCTL"]
failures = 0


def check(cond, what):
    """Count and print a failed check; return cond."""
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    return cond


def rlctl(*args):
    return subprocess.run([RLCTL, *args], capture_output=True, text=True)


def summary(test):
    print("%s: %s" % (test, "%d failures" % failures if failures else "all checks passed"))
    return 1 if failures else 0
