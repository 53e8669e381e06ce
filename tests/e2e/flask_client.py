#!/usr/bin/env python3
"""flask_client.py - httpc.py's "hold" for tests/e2e/flask_limiter.sh.

    flask_client.py HOST PORT PATH COUNT [HEADER: VALUE ...]

Opens COUNT connections, sends GET PATH on each, reads every answer (see
httpc.py), and prints one line per response in request order:
    STATUS<TAB>X-RateLimit-Limit<TAB>X-RateLimit-Remaining<TAB>X-RateLimit-Reset<TAB>Retry-After<TAB>BODY
with "-" for an absent header (Flask-Limiter's headers with headers_enabled).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpc import connect, response, send  # noqa: E402

FIELDS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after")


def receive(sock):
    status, fields, body = response(sock)
    first = body.decode("latin-1").split("\n", 1)[0].strip()
    return "\t".join([status] + [fields.get(h, "-") for h in FIELDS] +
                     [first if first.isdigit() else "-"])


def main(argv):
    host, port, path, count = argv[1], int(argv[2]), argv[3], int(argv[4])
    socks = [connect(host, port) for _ in range(count)]
    time.sleep(0.5)  # let the workers accept their connection
    for i, s in enumerate(socks, 1):
        send(s, host, path, argv[5:], i)
    print("\n".join(receive(s) for s in socks))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (OSError, IndexError, ValueError) as e:
        print(f"flask_client: {e}", file=sys.stderr)
        sys.exit(2)
