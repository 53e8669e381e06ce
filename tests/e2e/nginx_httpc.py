#!/usr/bin/env python3
"""nginx_httpc.py - the HTTP client of the nginx e2e tests.

    nginx_httpc.py burst HOST PORT PATH COUNT [HEADER: VALUE ...]
    nginx_httpc.py seq   HOST PORT PATH COUNT [HEADER: VALUE ...]
    nginx_httpc.py order HOST PORT PATH COUNT [HEADER: VALUE ...]

Every request is GET PATH on its own connection ("Connection: close").
burst opens all COUNT connections first (each from its own source port,
so nginx's reuseport sockets spread them over the workers by hash), then
sends every request, then reads every answer; seq sends them one after
another.  "{i}" in a header is replaced by the request's number.

Prints one line per response, in request order, tab-separated:
    STATUS  X-Pid  Retry-After  RateLimit  RateLimit-Policy  PARSE
with "-" for an absent header.  order is burst, but prints the answers in
the order they were complete (a thread per connection), each line led by
the request's number and ending in one more field, X-Srl-Delay.  PARSE is "ok" when the rate-limit headers
present parse per draft-ietf-httpapi-ratelimit-headers (structured fields:
RateLimit-Policy a list of "name";q=INT;w=INT items, RateLimit one
"name";r=INT;t=INT item naming a policy of RateLimit-Policy) and
Retry-After is delay-seconds, "none" when there are none, else "bad:WHY".
Exits 2 on a connection or HTTP parse error.
"""
import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from httpc import connect, response, send  # noqa: E402  (tests/e2e/httpc.py)

ITEM = re.compile(r'^"([A-Za-z0-9_.-]+)"((?:;[a-z]+=[0-9]+)+)$')


def params(item):
    m = ITEM.match(item.strip())
    if not m:
        return None, None
    return m.group(1), dict(p.split("=") for p in m.group(2)[1:].split(";"))


def judge(f):
    pol, rl, ra = f.get("ratelimit-policy"), f.get("ratelimit"), f.get("retry-after")
    if pol is None and rl is None and ra is None:
        return "none"
    names = set()
    if pol is not None:
        for item in pol.split(","):
            name, p = params(item)
            if name is None or set(p) != {"q", "w"} or int(p["q"]) < 1 or int(p["w"]) < 1:
                return "bad:policy"
            names.add(name)
    if rl is not None:
        name, p = params(rl)
        if name is None or set(p) != {"r", "t"} or (pol is not None and name not in names):
            return "bad:ratelimit"
    if ra is not None and not re.fullmatch(r"[0-9]+", ra):
        return "bad:retry-after"
    return "ok"


def receive(sock, extra=()):
    status, fields, _ = response(sock)
    return "\t".join([status] + [fields.get(h, "-") for h in
                                 ("x-pid", "retry-after", "ratelimit", "ratelimit-policy")]
                     + [judge(fields)] + [fields.get(h, "-") for h in extra])


def main(argv):
    mode, host, port, path, count = argv[1], argv[2], int(argv[3]), argv[4], int(argv[5])
    headers = argv[6:]
    out = []
    if mode == "seq":
        for i in range(1, count + 1):
            s = connect(host, port)
            send(s, host, path, headers, i)
            out.append(receive(s))
    elif mode == "burst":
        socks = [connect(host, port) for _ in range(count)]
        for i, s in enumerate(socks, 1):
            send(s, host, path, headers, i)
        out = [receive(s) for s in socks]
    elif mode == "order":
        socks = [connect(host, port) for _ in range(count)]
        lock = threading.Lock()

        def one(i, s):
            line = receive(s, ("x-srl-delay",))
            with lock:   # appended as each answer is complete: their order
                out.append(f"{i}\t{line}")
        threads = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate(socks, 1)]
        for i, s in enumerate(socks, 1):
            send(s, host, path, headers, i)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        raise SystemExit(f"unknown mode {mode}")
    print("\n".join(out))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (OSError, IndexError, ValueError) as e:
        print(f"nginx_httpc: {e}", file=sys.stderr)
        sys.exit(2)
