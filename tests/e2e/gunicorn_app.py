"""gunicorn_app.py - the WSGI app of tests/e2e/gunicorn.sh (not a test itself).

Every request with an X-Key header goes through srl.wsgi.RateLimit over the
shared segment $SRL_GUNICORN_SEGMENT (policy $SRL_GUNICORN_POLICY); the app
behind it answers its own pid.  Requests without X-Key are not limited (the
script's readiness probe).

So that the requests are spread over the workers by construction, not by
luck, each keyed request first registers its worker's pid in
$SRL_GUNICORN_DIR and waits until $SRL_GUNICORN_WORKERS distinct workers have
registered (bounded: after 20 s it goes on, and the script's pid count
fails).  A sync worker holds one request at a time, so with that many
requests in flight at once every worker must take one.

At import the module records the pid that loaded it (loaded.<pid>): under
--preload that is the master, without it each worker.
"""
import os
import time

import srl
import srl.wsgi

_dir = os.environ["SRL_GUNICORN_DIR"]
_workers = int(os.environ["SRL_GUNICORN_WORKERS"])
open(os.path.join(_dir, "loaded.%d" % os.getpid()), "w").close()

limiter = srl.Limiter.shared(os.environ["SRL_GUNICORN_SEGMENT"],
                             os.environ["SRL_GUNICORN_POLICY"], capacity=1024, key_display=32)


def _pid_app(environ, start_response):
    body = b"%d\n" % os.getpid()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


_limited = srl.wsgi.RateLimit(_pid_app, limiter, key=lambda env: env.get("HTTP_X_KEY"))


def _barrier():
    open(os.path.join(_dir, "worker.%d" % os.getpid()), "w").close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if sum(f.startswith("worker.") for f in os.listdir(_dir)) >= _workers:
            return
        time.sleep(0.01)


def application(environ, start_response):
    if environ.get("HTTP_X_KEY") is not None:
        _barrier()
    return _limited(environ, start_response)
