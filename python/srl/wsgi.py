"""srl.wsgi - a WSGI middleware that rate-limits requests with an srl limiter.

    from srl.wsgi import RateLimit
    application = RateLimit(application, srl.Limiter.shared("myapp", "100/1m"),
                            key=lambda environ: environ.get("HTTP_X_API_KEY"))

Each request is decided by limiter.acquire(key(environ), cost):
  - allowed: the wrapped app answers, and RateLimit-Policy and RateLimit are
    appended to its headers;
  - denied: the app is not called; the answer is 429 Too Many Requests with
    RateLimit-Policy, RateLimit and Retry-After (srl.headers());
  - key(environ) returned None or an empty key ("" or b"", e.g. an empty
    X-Api-Key: header): the request is not limited (no headers), as in
    mod_srl;
  - a key longer than srl.KEY_MAX bytes (UTF-8) is limited under its
    srl.key_fit form (srl_key_fit: its head and a hash of the whole key), the
    same key mod_srl, PHP and every other host of the fleet make of it.
So no header a client sends makes the middleware raise.  The default key is
the client address (REMOTE_ADDR).  An error for which the library still
decided by on_full (a lock that timed out or cannot be used, a store that
failed: the srl.Error carries that decision) is answered with it, as the C
library decides; every other srl.Error propagates.

exempt=["10.0.0.0/8", "::1"]: requests whose REMOTE_ADDR is in one of these
ranges (srl.cidr_match; ::ffff:a.b.c.d counts as IPv4) are never refused.  Such
a request is decided under its range's key ("10.0.0.0/8"), which the middleware
marks exempt in the limiter (limiter.exempt, srl_key_exempt), so the library
counts it (stats()["allowed"] and ["exempt"]) and a ban by hand of the range's
key still wins; the client's own key is untouched.  On a limiter without
exemptions (Redis, fronted: srl.NotSupportedError) such a request passes uncounted.
A bad range is a ValueError at construction.  REMOTE_ADDR is the peer the
server saw: behind a proxy, set it from a trusted header first (werkzeug's
ProxyFix, gunicorn's forwarded_allow_ips).

Address prefixes as keys: key=lambda environ: srl.ip_key(environ["REMOTE_ADDR"],
v4=32, v6=64) counts each IPv6 /64 as one client ("2001:db8::/64").

The RateLimit-Policy name is the limiter's (lim.name: the segment's name,
as mod_srl's and PHP's headers give it), or name= when given.

Every store works: Limiter.redis(uri, ...) for one limit across the fleet,
Limiter.fronted(name, uri, ...) for that with the host segment in front;
a Redis server that is down is answered by on_full's decision (the error
carries it), so the middleware never raises for it.

With a shared limiter the count is host-wide: open it before the server forks
(gunicorn --preload) or in each worker; both reach the same segment.
"""
import srl

__all__ = ["RateLimit"]


def _remote_addr(environ):
    return environ.get("REMOTE_ADDR")


class RateLimit:
    """WSGI middleware: RateLimit(app, limiter, key=callable(environ) -> str|bytes|None,
    cost=1, name=None, exempt=[CIDR, ...])."""

    def __init__(self, app, limiter, key=_remote_addr, cost=1, name=None, exempt=()):
        self.app = app
        self.limiter = limiter
        self.key = key
        self.cost = cost
        # RateLimit-Policy's name: the limiter's (limiter.name), as mod_srl and
        # PHP name it; "default" only for a limiter without one (anonymous, local)
        self.name = name if name is not None else getattr(limiter, "name", None)
        # Canonical range texts (srl.cidr raises ValueError for a bad one).
        self.exempt = [srl.cidr(r) for r in exempt]

    def _exempt_key(self, environ):
        """The exempt key of the first range holding REMOTE_ADDR, marked exempt
        in the limiter; "" when the limiter has no exemptions; else None."""
        addr = environ.get("REMOTE_ADDR")
        if not self.exempt or not addr:
            return None
        for r in self.exempt:
            if srl.cidr_match(r, addr):
                try:
                    self.limiter.exempt(r)
                except srl.Error as e:
                    if e.name != "SRL_ENOTSUP":
                        raise
                    return ""
                return r
        return None

    def _decide(self, key):
        try:
            return self.limiter.acquire(key, self.cost)
        except srl.Error as e:
            if e.decision is None:
                raise
            return e.decision

    def __call__(self, environ, start_response):
        key = self._exempt_key(environ)
        if key == "":
            return self.app(environ, start_response)
        if key is None:
            key = self.key(environ)
        if key is not None:
            key = srl.key_fit(key)
        if key is None:
            return self.app(environ, start_response)
        d = self._decide(key)
        extra = srl.headers(d, self.name)
        if not d.allowed:
            body = b"Too Many Requests\n"
            start_response("429 Too Many Requests",
                           [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body)))] + extra)
            return [body]

        def start_with_headers(status, headers, exc_info=None):
            return start_response(status, list(headers) + extra, exc_info)
        return self.app(environ, start_with_headers)
