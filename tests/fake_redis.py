#!/usr/bin/env python3
"""fake_redis.py - a hostile Redis peer for tests/check_redis_hostile.c.

Speaks just enough RESP for srl's Redis store (AUTH, SELECT, PING, EVAL of
the open and slot scripts, SCRIPT LOAD, EVALSHA, CLUSTER SLOTS, SCAN,
DBSIZE, HMGET) on 127.0.0.1, an ephemeral port, and answers EVALSHA (or
SCAN) the way MODE says:

  normal        a valid decision {1, P-1, "0", "1000000"} (refund: {-2})
  slow          that decision one byte every 0.1 s (about 2 s in all)
  bulk          a 64 MiB bulk string
  line          a 64 MiB status line
  array         an array of 2,000,000 integers
  moved, ask    MOVED/ASK to a second listener (the "foreign" host); this
                server's CLUSTER SLOTS names itself alone for every slot
  scanloop      SCAN's cursor never returns to 0 (EVALSHA as normal)
  walkhuge      SCAN returns two keys, each peek answered with an array of
                400,000 integers (each under the bound of one reply, the
                two together over it)
  remaining     {1, 4294967295, 0, 1000000}
  retry         {0, 0, 9223372036854775000, 1000000}
  allowed       {2, 5, 0, 1000000}
  wrongtype     the bulk string "hello"
  waitlong      a reservation (max_wait > 0) admitted with a wait of max_wait + 1
  waitfree      a reservation admitted with a wait of 5 ns and remaining 1
  waitdenied    a reservation denied with a wait of 5 ns
                (these three: other calls answered normally)
  concok        a concurrency admission {1, 0, "0", "1000", 7} (valid for N >= 1)
  concnogen     a concurrency admission without a generation {1, 0, "0", "1000", 0}
  concholders   a concurrency denial naming N + 1 holders of this host
  http          not Redis at all: whatever it is sent, an HTTP/1.1 400 answer,
                then the connection is closed (a port that is a web server)

With --once only the first EVALSHA gets MODE's answer, later ones are
normal.  Events go to stdout, one line each, flushed: "ready PORT",
"conn", "evalsha", "sent N of M" (a huge reply, N bytes written before the
peer went away), "foreign ..." (anything the second listener
received: it must stay silent).  The process exits when its stdin closes
(the test that started it is gone), so it never outlives its test.
"""
import socket
import sys
import threading
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
once = "--once" in sys.argv
lock = threading.Lock()
evalshas = 0
policy = b""   # the policy an opener stored (adopting before that: none)
SHA = b"0123456789abcdef0123456789abcdef01234567"


def event(text):
    with lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def arr(items):
    return b"*%d\r\n" % len(items) + b"".join(items)


def num(n):
    return b":%d\r\n" % n


def decision(vals):
    """A script's decision: allowed and remaining as integers, the two
    waits as decimal bulk strings (they may pass 2^53)."""
    return arr([num(vals[0]), num(vals[1])] + [bulk(b"%d" % v) for v in vals[2:]])


class Conn:
    def __init__(self, sock):
        self.s = sock
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def exact(self, n):
        while len(self.buf) < n + 2:
            d = self.s.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        b, self.buf = self.buf[:n], self.buf[n + 2:]
        return b

    def command(self):
        ln = self.line()
        if not ln.startswith(b"*"):
            raise EOFError
        args = []
        for _ in range(int(ln[1:])):
            h = self.line()
            args.append(self.exact(int(h[1:])))
        return args


def send_huge(s, head, body_len, chunk, tail):
    total = len(head) + body_len + len(tail)
    sent = 0
    try:
        s.sendall(head)
        sent += len(head)
        left = body_len
        while left > 0:
            c = chunk if left >= len(chunk) else chunk[:left]
            s.sendall(c)
            sent += len(c)
            left -= len(c)
        s.sendall(tail)
        sent += len(tail)
    except OSError:
        pass
    event("sent %d of %d" % (sent, total))


def hostile_evalsha(c, args):
    s = c.s
    P = int(args[8])
    maxw = int(args[12])
    if mode.startswith("wait") and maxw == 0:
        return False
    if mode == "slow":
        out = decision([1, P - 1, 0, 1000000])
        for i in range(len(out)):
            try:
                s.sendall(out[i:i + 1])
            except OSError:
                return
            time.sleep(0.1)
    elif mode == "bulk":
        n = 64 << 20
        send_huge(s, b"$%d\r\n" % n, n, b"x" * 65536, b"\r\n")
    elif mode == "line":
        send_huge(s, b"+", 64 << 20, b"x" * 65536, b"\r\n")
    elif mode == "array":
        n = 2000000
        send_huge(s, b"*%d\r\n" % n, 4 * n, b":1\r\n" * 16384, b"")
    elif mode == "walkhuge":
        n = 400000
        send_huge(s, b"*%d\r\n" % n, 4 * n, b":1\r\n" * 16384, b"")
    elif mode in ("moved", "ask"):
        word = b"MOVED" if mode == "moved" else b"ASK"
        s.sendall(b"-%s 1234 127.0.0.1:%d\r\n" % (word, foreign_port))
    elif mode == "remaining":
        s.sendall(decision([1, 4294967295, 0, 1000000]))
    elif mode == "retry":
        s.sendall(decision([0, 0, 9223372036854775000, 1000000]))
    elif mode == "allowed":
        s.sendall(decision([2, 5, 0, 1000000]))
    elif mode == "wrongtype":
        s.sendall(bulk(b"hello"))
    elif mode == "waitlong":
        s.sendall(decision([1, 0, 0, 1000000, maxw + 1]))
    elif mode == "waitfree":
        s.sendall(decision([1, 1, 0, 1000000, 5]))
    elif mode == "waitdenied":
        s.sendall(decision([0, 0, 5, 1000000, 5]))
    elif mode in ("concok", "concnogen"):
        s.sendall(arr([num(1), num(0), bulk(b"0"), bulk(b"1000"), num(7 if mode == "concok" else 0)]))
    elif mode == "concholders":
        s.sendall(arr([num(0), num(0), bulk(b"5"), bulk(b"5"), num(0)] +
                      [bulk(b"%d 1 1" % (i + 1)) for i in range(P + 1)]))
    else:
        return False
    return True


def serve(sock):
    global evalshas, policy
    event("conn")
    if mode == "http":
        try:
            sock.recv(65536)
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
        except OSError:
            pass
        sock.close()
        return
    c = Conn(sock)
    try:
        while True:
            a = c.command()
            cmd = a[0].upper()
            if cmd in (b"AUTH", b"SELECT"):
                out = b"+OK\r\n"
            elif cmd == b"PING":
                out = b"+PONG\r\n"
            elif cmd == b"SCRIPT":
                out = bulk(SHA)
            elif cmd == b"EVAL":
                if b"'policy'" in a[1]:   # open_cfg: store ARGV[1], or adopt
                    policy = a[4] or policy
                    out = (arr([num(1), bulk(policy), bulk(b"1700000000"), bulk(b"0")])
                           if policy else arr([num(-1)]))
                else:                      # a cluster's slot hash
                    out = num(1)
            elif cmd == b"EVALSHA":
                with lock:
                    evalshas += 1
                    first = evalshas == 1
                event("evalsha")
                if (first or not once) and hostile_evalsha(c, a):
                    continue
                if a[6] == b"r":
                    out = arr([num(-2)])
                else:   # a reservation's (ARGV[7] > 0) adds its wait, 0
                    out = decision([1, int(a[8]) - 1, 0, 1000000] +
                                   ([0] if int(a[12]) > 0 else []))
            elif cmd == b"CLUSTER":
                out = arr([arr([num(0), num(16383),
                                arr([bulk(b"127.0.0.1"), num(port), bulk(b"f" * 40)])])])
            elif cmd == b"SCAN":
                keys = [bulk(b"srl:k:a"), bulk(b"srl:k:b")] if mode == "walkhuge" else []
                out = arr([bulk(b"1" if mode == "scanloop" else b"0"), arr(keys)])
            elif cmd == b"DBSIZE":
                out = num(0)
            elif cmd == b"HMGET":
                out = arr([b"$-1\r\n"] * (len(a) - 2))
            else:
                out = b"-ERR fake_redis: unknown command\r\n"
            sock.sendall(out)
    except (EOFError, OSError, ValueError):
        pass
    finally:
        sock.close()


def foreign(sock):
    event("foreign conn")
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            event("foreign got %r" % d[:200])
    except OSError:
        pass
    sock.close()


def listen():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s, s.getsockname()[1]


def accept_loop(ls, fn):
    while True:
        sock, _ = ls.accept()
        threading.Thread(target=fn, args=(sock,), daemon=True).start()


main_ls, port = listen()
foreign_ls, foreign_port = listen()
threading.Thread(target=accept_loop, args=(foreign_ls, foreign), daemon=True).start()
threading.Thread(target=accept_loop, args=(main_ls, serve), daemon=True).start()
event("ready %d" % port)
sys.stdin.read()   # EOF: the test is gone
