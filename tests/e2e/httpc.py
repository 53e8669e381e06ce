#!/usr/bin/env python3
"""httpc.py - the HTTP client of the e2e tests.

    httpc.py seq  HOST PORT PATH COUNT [HEADER: VALUE ...]
    httpc.py hold HOST PORT PATH COUNT [HEADER: VALUE ...]

Every request is GET PATH on its own connection, "Connection: close" (no
keep-alive), so each one may land on any server child.  seq sends them one
after another.  hold first opens all COUNT connections, waits until the
server accepted them, then sends every request and reads every answer: the
server's children each hold one connection at a time, so the requests are
spread over all of them (prefork: one per child; event: one per thread).

"{i}" in a header is replaced by the request's number (1..COUNT), so that
every request may carry a key of its own.

Prints one line per response, in request order:
    STATUS<TAB>Retry-After<TAB>RateLimit<TAB>RateLimit-Policy
with "-" for an absent header.  Exits 2 on a connection or parse error.
"""
import socket
import sys
import time


def connect(host, port):
    return socket.create_connection((host, port), timeout=30)


def send(sock, host, path, headers, i):
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    lines += [h.replace("{i}", str(i)) for h in headers]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())


def response(sock):
    """Read the whole answer and close: (status, {lowercase field: value}, body bytes)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return lines[0].split(" ")[1], fields, body


def receive(sock):
    status, fields, _ = response(sock)
    return "\t".join([status] + [fields.get(h, "-") for h in
                                 ("retry-after", "ratelimit", "ratelimit-policy")])


def main(argv):
    mode, host, port, path, count = argv[1], argv[2], int(argv[3]), argv[4], int(argv[5])
    headers = argv[6:]
    out = []
    if mode == "seq":
        for i in range(1, count + 1):
            s = connect(host, port)
            send(s, host, path, headers, i)
            out.append(receive(s))
    elif mode == "hold":
        socks = [connect(host, port) for _ in range(count)]
        time.sleep(0.5)  # let the children accept their connection
        for i, s in enumerate(socks, 1):
            send(s, host, path, headers, i)
        out = [receive(s) for s in socks]
    else:
        raise SystemExit(f"unknown mode {mode}")
    print("\n".join(out))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (OSError, IndexError, ValueError) as e:
        print(f"httpc: {e}", file=sys.stderr)
        sys.exit(2)
