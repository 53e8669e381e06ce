#!/usr/bin/env python3
"""policyd_client.py - a Postfix-like policy client for tests/e2e/policyd_socket.sh.

  policyd_client.py SOCKET burst USER N    N requests on one connection; prints
                                           one line per answer
  policyd_client.py SOCKET raw HEX         send bytes, print the answer and
                                           whether the server closed after it
"""
import socket
import sys


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    return s


def answer(s):
    buf = b""
    while not buf.endswith(b"\n\n"):
        chunk = s.recv(4096)
        if not chunk:
            return buf.decode() + "<closed>"
        buf += chunk
    return buf[:-2].decode()


def main():
    path, mode = sys.argv[1], sys.argv[2]
    s = connect(path)
    if mode == "burst":
        user, n = sys.argv[3], int(sys.argv[4])
        for _ in range(n):
            s.sendall(("request=smtpd_access_policy\nprotocol_state=DATA\n"
                       "sasl_username=%s\nrecipient_count=1\n\n" % user).encode())
            print(answer(s))
    else:
        s.sendall(bytes.fromhex(sys.argv[3]))
        a = answer(s)
        closed = s.recv(1) == b""
        print(a + (" | closed" if closed else " | open"))


main()
