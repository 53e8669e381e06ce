"""flask_app.py - the Flask app of tests/e2e/flask_limiter.sh (not a test itself).

Flask-Limiter (Debian's python3-flask-limiter 3.3) on srl's `limits` storage:
GET /hit is limited to 12/hour per X-Key header (strategy from
$SRL_FLASK_STRATEGY: fixed-window or moving-window), headers_enabled so
every answer carries Flask-Limiter's X-RateLimit-* headers; the answer's
body is the worker's pid.  GET /ping is exempt (the script's readiness probe).

The storage is one line away from Flask-Limiter's default: storage_uri
"srl:///PREFIX" instead of "memory://", after `import srl.limits_storage`.

As in gunicorn_app.py, each /hit first registers its worker's pid in
$SRL_FLASK_DIR and waits (at most 20 s) until $SRL_FLASK_WORKERS workers
have: with 40 requests in flight at once on 4 sync workers, every worker
takes some, by construction.  The barrier is a before_request registered
before the Limiter's, so it runs before the limit is decided.
"""
import os
import time

from flask import Flask, request
from flask_limiter import Limiter

import srl.limits_storage  # noqa: F401  registers srl:// with limits

_dir = os.environ["SRL_FLASK_DIR"]
_workers = int(os.environ["SRL_FLASK_WORKERS"])

app = Flask(__name__)


@app.before_request
def _barrier():
    if request.path != "/hit":
        return
    open(os.path.join(_dir, "worker.%d" % os.getpid()), "w").close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if sum(f.startswith("worker.") for f in os.listdir(_dir)) >= _workers:
            return
        time.sleep(0.01)


limiter = Limiter(lambda: request.headers.get("X-Key", "none"), app=app,
                  storage_uri=os.environ["SRL_FLASK_STORAGE"],
                  strategy=os.environ["SRL_FLASK_STRATEGY"], headers_enabled=True)


@app.route("/hit")
@limiter.limit("12/hour")
def hit():
    return "%d\n" % os.getpid()


@app.route("/ping")
@limiter.exempt
def ping():
    return "ok\n"


application = app
