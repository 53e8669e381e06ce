#!/usr/bin/env python3
"""nginx_slow.py PORT CTL - the slow upstream of tests/e2e/nginx_concurrency.sh.

An HTTP server on 127.0.0.1:PORT, one thread per request.  GET /PATH?PHASE
records its entry (an empty file CTL/PHASE/in.N), then holds the request
until the test creates CTL/PHASE/release, then answers 200 "done".  So the
test, not a timer, decides when requests end (it polls for the files).
"""
import itertools
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, CTL = int(sys.argv[1]), sys.argv[2]
counter = itertools.count(1)
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        phase = self.path.partition("?")[2] or "default"
        d = os.path.join(CTL, phase)
        os.makedirs(d, exist_ok=True)
        with lock:
            n = next(counter)
        open(os.path.join(d, f"in.{n}"), "w").close()
        while not os.path.exists(os.path.join(d, "release")):
            time.sleep(0.02)
        body = b"done\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args):
        pass


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
