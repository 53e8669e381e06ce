<?php
/*
 * Srl.php - the PHP binding of srl, a host-wide rate limiter, over FFI.
 *
 * One Srl object is one open srl segment (/dev/shm/NAME): every php-fpm
 * worker, every CLI process and every other program (Apache's mod_srl, a
 * C server) that opens the same name with the same policy and capacity
 * shares one set of per-key states, so a limit holds host-wide.
 *
 *     $srl = new Srl('/myapp-api', 'token_bucket:100/1m', 65536);
 *     $d = $srl->acquire($apiKey);       // ['allowed' => bool, 'remaining' => int,
 *                                        //  'retry_after' => int, 'limit' => int, ...]
 *     if (!$srl->sendHeaders()) { exit; } // 429 + Retry-After + RateLimit headers
 *
 * The C declarations come from srl_ffi.h.  Under php-fpm they are loaded
 * once at startup (ffi.enable=preload with ffi.preload, see srl.ini) and
 * found here through FFI::scope('srl'); elsewhere (the CLI with
 * ffi.enable=1) this file loads the header itself.
 *
 * Lifetime: the constructor opens (and, if needed, creates) the segment,
 * the destructor closes the handle; the segment and its states stay.
 * Opening is a few system calls (shm_open, fstat, mmap), cheap enough to do
 * once per request.  Objects are not shared between processes: a forked
 * child that wants to limit opens its own.
 *
 * In-flight limits (policy "concurrency:N"): enter() returns an SrlLease
 * while the request is inside, or null when N requests of the key are in
 * flight already.  The unit goes back when the lease is left: leave(), the
 * lease's destructor, a shutdown function registered by enter(), or
 * Srl::close(), whichever comes first (the others find it left).  A worker
 * killed before any of them runs (SIGKILL, request_terminate_timeout) is
 * covered by the library: it records each unit's holder and reclaims a dead
 * one's units by itself.
 *
 *     $lease = $srl->enter($clientIp);
 *     if ($lease === null) { $srl->sendHeaders(); exit; }   // 429 + Retry-After
 *
 * Errors from the library throw SrlException carrying the SRL_E* code and
 * srl_strerror()'s text, then the cause where the library names one: a
 * Redis store's server and what it did (srl_last_error: "connect
 * 127.0.0.1:6390: connection refused"), a refused segment's owner, mode and
 * fix (srl_open_explain).  A lock that timed out (or can no longer be used)
 * is not thrown: the library still decides by the segment's on_full rule,
 * and acquire() returns that decision with 'degraded' => true.
 *
 * More than one host: with the option 'redis' => URI the limit lives in a
 * Redis server, one limit for every host that opens the same server and
 * prefix, with the segment NAME as the host tier in front (srl_open_fronted):
 * a key Redis denied is answered on the host until the denial ends, without
 * a round trip ('local' => true in the decision):
 *
 *     $srl = new Srl('api', 'token_bucket:100/1m', 65536,
 *                    ['redis' => 'unix:///run/redis/redis.sock?prefix=api&timeout_ms=50']);
 *
 * NAME is then the host segment (its keys are PREFIX:KEY for rlctl) and the
 * policy's name in the RateLimit headers.  A server
 * that is slow or down does not throw either: acquire() returns on_full's
 * decision with 'degraded' => true, after at most timeout_ms, and the
 * library reconnects by itself.  Each php-fpm worker makes its own
 * connection, lazily, on its first request after the fork.
 */
declare(strict_types=1);

final class SrlException extends RuntimeException
{
}

/* SrlException codes: srl.h's SRL_ERRNO_MAP, SrlError::NAME for SRL_NAME.
 * tests/e2e/ffi_layout.sh checks this list against the C table. */
final class SrlError
{
    public const OK = 0;
    public const EINVAL = -1;
    public const EPOLICY = -2;
    public const ECOST = -3;
    public const EKEY = -4;
    public const ENOMEM = -5;
    public const ENOBUFS = -6;
    public const ENOENT = -7;
    public const EEXIST = -8;
    public const EMISMATCH = -9;
    public const EFOREIGN = -10;
    public const EVERSION = -11;
    public const ECORRUPT = -12;
    public const ESTALE = -13;
    public const EACCES = -14;
    public const ENOSPC = -15;
    public const ETIMEDOUT = -16;
    public const ENOTRECOVERABLE = -17;
    public const ENOTSUP = -18;
    public const ESYS = -19;
    public const ETOOBIG = -20;
}

final class Srl
{
    public const CREATE = 0x1;
    public const EXCL = 0x2;
    /* An existing segment with another policy: ADOPT takes the segment's
     * (its limits then drive the headers), CHANGE gives it this one, live,
     * each key keeping its use (srl.h, LIVE POLICY CHANGES); neither: throw
     * SRL_EMISMATCH.  Capacity, key_display and tier names never change. */
    public const ADOPT = 0x4;
    public const CHANGE = 0x8;

    private const DECISION_UNTRACKED = 0x1;
    private const DECISION_DEGRADED = 0x2;
    private const DECISION_LOCAL = 0x8;
    private const DECISION_WOULD_DENY = 0x4;
    private const DECISION_BAN_STARTED = 0x10;   /* SRL_DECISION_BAN_STARTED */
    private const CONFIG_DRY_RUN = 0x1;   /* srl_config.flags SRL_CONFIG_DRY_RUN */
    private const CONFIG_FLOOD_CACHE = 0x2;   /* SRL_CONFIG_FLOOD_CACHE */
    private const CONFIG_LOCKFREE = 0x4;      /* SRL_CONFIG_LOCKFREE */

    private FFI $ffi;
    private ?FFI\CData $lim;     /* srl_limiter * */
    private FFI\CData $limits;   /* srl_limits: the policy, one limit or a compound */
    private string $token;       /* the policy's name in the headers */
    private ?FFI\CData $last = null; /* srl_decision of the last acquire() or enter() */
    private bool $dryRun = false;    /* option dry_run: sendHeaders() sends nothing */
    private bool $redis = false;     /* a Redis (tiered) store: errors carry srl_last_error */
    /* The leases enter() handed out and not yet left, spl_object_id =>
     * WeakReference: close() leaves them while the handle still exists
     * (without keeping a dropped lease alive, whose destructor leaves). */
    private array $leases = [];
    /* Every lease held in this request, of every Srl, the same way; left
     * by one shutdown function, registered with the first lease of the
     * request (static properties live for one request, as do shutdown
     * functions: one per lease would pile up in a long-running CLI loop). */
    private static array $held = [];
    private static bool $atShutdown = false;

    /* setBanLog(): where and at what level a penalty ban's start is logged. */
    private static mixed $banLogger = null;
    private static ?string $banLevel = 'warning';

    private static ?FFI $shared = null;   /* what ffi() returns */
    private static string $binding = '';

    /*
     * The FFI instance: the scope "srl" bound at startup (php-fpm), or the
     * header loaded now (the CLI, ffi.enable=1).  With ffi.enable=preload
     * only preloaded code may touch FFI at all, FFI::scope included: this
     * file must be preloaded too (preload.php does it).
     */
    public static function ffi(): FFI
    {
        if (self::$shared === null) {
            try {
                self::$shared = FFI::scope('srl');
                self::$binding = 'scope';
            } catch (FFI\Exception $e) {
                self::$shared = FFI::load(__DIR__ . '/srl_ffi.h');
                self::$binding = 'load';
            }
        }
        return self::$shared;
    }

    /*
     * The key to limit a client's value under (srl_key_fit, the rule of
     * every binding): null for '' (do not limit such a request, as mod_srl
     * and srl.wsgi do not), the key itself for 1..4096 bytes, and for a
     * longer one its fitted form, 4096 bytes: its first 4064 and a hash of
     * the whole key, the same key mod_srl and Python make of it.  So
     * acquire(Srl::keyFit($_SERVER['HTTP_X_API_KEY'] ?? '')) never throws
     * SRL_EKEY for a key a client sends (check for null first).
     */
    public static function keyFit(string $key): ?string
    {
        $n = strlen($key);
        if ($n === 0) {
            return null;
        }
        if ($n <= 4096) {
            return $key;
        }
        $ffi = self::ffi();
        $len = $ffi->new('size_t');
        $len->cdata = $n;
        $buf = $ffi->new('unsigned char[4096]');
        $ffi->srl_key_fit($key, FFI::addr($len), $buf);
        return FFI::string($buf, $len->cdata);
    }

    /* ------------------------------------------ address keys, exemptions
     * Thin shells over srl_key_ip and srl_cidr_* (src/http/keyip.c): the same
     * bytes mod_srl, nginx and Python make of an address.  A bad address or
     * range is an SrlException with code SrlError::EINVAL naming it. */

    /*
     * The key of $addr's prefix: its first $v4 (0..32) or $v6 (0..128)
     * bits, '192.0.2.0/24', '2001:db8:1:2::/64' (RFC 5952, the prefix always
     * shown); '::ffff:192.0.2.1' counts as IPv4.  Srl::ipKey($_SERVER
     * ['REMOTE_ADDR']) keys each IPv4 address and each IPv6 /64 apart: one
     * client owning a /64 is one client.
     */
    public static function ipKey(string $addr, int $v4 = 32, int $v6 = 64): string
    {
        if ($v4 < 0 || $v4 > 32 || $v6 < 0 || $v6 > 128) {
            throw new SrlException("srl: ipKey: prefixes are v4 0..32 and v6 0..128, not "
                                   . "v4=$v4 v6=$v6", SrlError::EINVAL);
        }
        $ffi = self::ffi();
        $buf = $ffi->new('char[44]');
        $n = strlen($addr) < 64 && strpos($addr, "\0") === false
            ? $ffi->srl_key_ip($addr, $v4, $v6, $buf, 44) : SrlError::EINVAL;
        if ($n < 0) {
            throw new SrlException("srl: ipKey: '" . addcslashes(substr($addr, 0, 64), "\0..\37")
                                   . "' is not an IPv4 or IPv6 address (dotted quad or RFC 4291 "
                                   . "text; no port, brackets or zone)", SrlError::EINVAL);
        }
        return FFI::string($buf, $n);
    }

    /* $text ('10.0.0.0/8', '::1', '2001:DB8::/32') in srl's form
     * ('2001:db8::/32'); an SrlException for a bad range (bits set past
     * its prefix included). */
    public static function cidr(string $text): string
    {
        $ffi = self::ffi();
        $c = self::parseCidr($ffi, $text);
        $buf = $ffi->new('char[44]');
        $n = $ffi->srl_cidr_format(FFI::addr($c), $buf, 44);
        self::check($ffi, $n, 'cidr');
        return FFI::string($buf, $n);
    }

    /* Whether $addr is in the range $range (an addr that is no address is
     * in none); an SrlException for a bad range. */
    public static function cidrMatch(string $range, string $addr): bool
    {
        $ffi = self::ffi();
        $c = self::parseCidr($ffi, $range);
        if (strlen($addr) >= 64 || strpos($addr, "\0") !== false) {
            return false;
        }
        return $ffi->srl_cidr_match(FFI::addr($c), $addr) === 1;
    }

    private static function parseCidr(FFI $ffi, string $text): FFI\CData
    {
        $c = $ffi->new('srl_cidr');
        if (strlen($text) >= 70 || strpos($text, "\0") !== false
            || $ffi->srl_cidr_parse($text, FFI::addr($c)) !== 0) {
            throw new SrlException("srl: '" . addcslashes(substr($text, 0, 70), "\0..\37")
                                   . "' is not an address range: give ADDRESS or ADDRESS/PREFIX "
                                   . "(10.0.0.0/8, 2001:db8::/32, ::1), the address with no bits "
                                   . "set past the prefix", SrlError::EINVAL);
        }
        return $c;
    }

    /* Exempt $key (srl_key_exempt): never refused, its decisions counted in
     * stats()['exempt'], until exempt($key, false).  Segments only (an
     * SrlException SrlError::ENOTSUP on redis=). */
    public function exempt(string $key, bool $on = true): void
    {
        self::check($this->ffi, $this->ffi->srl_key_exempt($this->handle(), $key, strlen($key),
                                                           $on ? 1 : 0), 'exempt');
    }

    /*
     * The middleware's decision for a client address: acquire() under
     * Srl::ipKey($addr, $v4, $v6), unless $addr is in one of the $exempt
     * ranges ('10.0.0.0/8', '::1'): then under that range's key, marked
     * exempt first (never refused, counted in stats()['exempt'], and a ban
     * by hand of the range's key still wins; the client's own key is
     * untouched).  On a store without exemptions (redis=) an exempt address
     * is admitted uncounted: ['allowed' => true, 'exempt' => true].  The
     * decision has 'exempt' => true|false.  A bad range or address is an
     * SrlException (check $exempt once with Srl::cidr at startup).
     */
    public function acquireAddr(string $addr, array $exempt = [], int $v4 = 32, int $v6 = 64,
                                int $cost = 1): array
    {
        foreach ($exempt as $range) {
            if (!self::cidrMatch($range, $addr)) {
                continue;
            }
            $key = self::cidr($range);
            $rc = $this->ffi->srl_key_exempt($this->handle(), $key, strlen($key), 1);
            if ($rc === SrlError::ENOTSUP) {
                return ['allowed' => true, 'exempt' => true];
            }
            self::check($this->ffi, $rc, 'exempt');
            return $this->acquire($key, $cost) + ['exempt' => true];
        }
        return $this->acquire(self::ipKey($addr, $v4, $v6), $cost) + ['exempt' => false];
    }

    /* How ffi() found the declarations: 'scope' (preloaded) or 'load'. */
    public static function binding(): string
    {
        self::ffi();
        return self::$binding;
    }

    /*
     * Open the segment NAME ("/" + 1..200 of [A-Za-z0-9._-]), creating it
     * with this config if it does not exist.  $spec is a policy
     * ('token_bucket:100/1m') or a whole configuration text (srl.h,
     * CONFIGURATION TEXT: 'gcra:100/1m capacity=65536 key_display=32
     * on_full=deny tier.paid=gcra:10000/1m'); $capacity (keys) and the
     * options array then set one option each, through the library's table
     * (srl_config_set), so each takes exactly what the spec would:
     * key_display, on_full, mode, lock_timeout_ms, owner, dry_run, lockfree,
     * flood_cache, redis (a uri: the limit is decided by the Redis store
     * there, NAME is the host tier's segment), tiers (['paid' =>
     * 'token_bucket:10000/1m', ...]: tier.NAME each; acquire() takes a tier
     * name), and PHP's own flags (Srl::CREATE, default; 0 to only open; |
     * Srl::CHANGE to give an existing segment this policy, live; Srl::ADOPT,
     * without CREATE, to take the segment's).  A bool is on/off, an int its
     * decimal digits (mode: its octal ones), a string as written.  An
     * existing segment with another policy or capacity throws
     * (SRL_EMISMATCH).  A bad policy throws SrlException (SRL_EPOLICY), a bad
     * uri SrlException (SRL_EINVAL) with the reason, any other bad option or
     * value InvalidArgumentException with the library's words, all before
     * anything is opened.  May also be called new Srl($name, $spec, $options).
     */
    public function __construct(string $name, string $spec, int|array|null $capacity = null,
                                array $options = [])
    {
        if (is_array($capacity)) {
            $options = $capacity;
            $capacity = null;
        }
        $ffi = self::ffi();
        $this->ffi = $ffi;
        $this->lim = null;
        $this->token = ltrim($name, '/');

        $cfg = $ffi->new('srl_config');
        $perr = $ffi->new('srl_policy_error');
        $rc = $ffi->srl_config_parse(FFI::addr($cfg), $spec, FFI::addr($perr));
        if ($rc < 0) {
            /* the library's message names the bad part and the fix */
            throw new SrlException("srl: policy '$spec': " . FFI::string($perr->message), $rc);
        }
        try {
            $flags = $this->configure($ffi, $cfg, $capacity, $options);
            $this->open($ffi, $name, $cfg, $flags);
        } finally {
            $ffi->srl_config_free(FFI::addr($cfg));   /* the open copied what it keeps */
        }
    }

    /* $capacity and the options onto $cfg (srl_config_set); returns the open flags. */
    private function configure(FFI $ffi, FFI\CData $cfg, ?int $capacity, array $options): int
    {
        if ($capacity !== null) {
            self::set($ffi, $cfg, 'capacity', (string)$capacity);
        }
        $flags = self::CREATE;
        foreach ($options as $opt => $value) {
            $opt = (string)$opt;
            if ($opt === 'flags') {
                $flags = (int)$value;
            } elseif ($opt === 'tiers') {
                if (!is_array($value)) {
                    throw new InvalidArgumentException("tiers must be an array of name => policy");
                }
                foreach ($value as $tier => $policy) {
                    if (!is_string($policy)) {
                        throw new InvalidArgumentException("tiers: '$tier' => a policy text");
                    }
                    self::set($ffi, $cfg, "tier.$tier", $policy, 'tiers');
                }
            } else {
                self::set($ffi, $cfg, $opt, match (true) {
                    is_bool($value) => $value ? 'on' : 'off',
                    is_int($value) => $opt === 'mode' ? decoct($value) : (string)$value,
                    is_string($value) => $value,
                    default => throw new InvalidArgumentException(
                        "$opt must be a bool, an int or a string"),
                });
            }
        }
        $redis = $ffi->srl_config_redis(FFI::addr($cfg));
        if ($redis !== null && isset($options['flags'])) {
            throw new InvalidArgumentException("option 'flags' is for a segment; a Redis store "
                                               . '(redis) does not take it');
        }
        $this->dryRun = ($cfg->flags & self::CONFIG_DRY_RUN) !== 0;
        return $flags;
    }

    /* One option through the library's table.  A policy's refusal (policy,
     * a tier's) is SrlException SRL_EPOLICY, a uri's SRL_EINVAL, the rest
     * InvalidArgumentException "WORD: why" ($word: the option as PHP names it). */
    private static function set(FFI $ffi, FFI\CData $cfg, string $opt, string $value,
                                ?string $word = null): void
    {
        $perr = $ffi->new('srl_policy_error');
        $rc = $ffi->srl_config_set(FFI::addr($cfg), $opt, $value, FFI::addr($perr));
        if ($rc === 0) {
            return;
        }
        $why = FFI::string($perr->message);
        $inValue = $perr->offset >= strlen($opt) + 1;   /* it counts in NAME=VALUE */
        if ($rc === SrlError::EPOLICY && $word === 'tiers' && $inValue) {
            throw new SrlException("srl: tier '" . substr($opt, 5) . "': policy '$value': $why",
                                   $rc);
        }
        if ($rc === SrlError::EPOLICY && $opt === 'redis' && $inValue) {
            /* the library's reason names the bad part, never the password */
            throw new SrlException("srl: $why", SrlError::EINVAL);
        }
        if ($rc !== SrlError::EPOLICY) {
            self::check($ffi, $rc, "option '$opt'");
        }
        throw new InvalidArgumentException($inValue ? ($word ?? $opt) . ": $why" : $why);
    }

    private function open(FFI $ffi, string $name, FFI\CData $cfg, int $flags): void
    {
        /* The policy in force, for the headers: a compound, or the one limit. */
        $limits = $ffi->new('srl_limits');
        if ($cfg->limits->count > 0) {
            FFI::memcpy($limits, $cfg->limits, FFI::sizeof($limits));
        } else {
            $limits->count = 1;
            FFI::memcpy($limits->limit[0], $cfg->policy, FFI::sizeof($cfg->policy));
        }
        $out = $ffi->new('srl_limiter *');
        $redis = $ffi->srl_config_redis(FFI::addr($cfg));
        if ($redis !== null) {
            $rc = $ffi->srl_open_fronted($name, $redis, FFI::addr($cfg), self::CREATE,
                                        FFI::addr($out));
            self::checkOpen($ffi, $rc, "open redis store '$name'", $name, $cfg, true);
            $this->redis = true;
        } else {
            $rc = $ffi->srl_open_shared($name, FFI::addr($cfg), $flags, FFI::addr($out));
            if ($rc === SrlError::EMISMATCH) {
                throw new SrlException("srl: open '$name': " . $ffi->srl_strerror($rc)
                                       . self::mismatchWhy($ffi, $name, $cfg), $rc);
            }
            self::checkOpen($ffi, $rc, "open '$name'", $name, $cfg, false);
            if ($flags & self::ADOPT) {
                /* The segment's current policy, not $spec's, is the one in force. */
                $info = $ffi->new('srl_info');
                $rc = $ffi->srl_info_get($out, FFI::addr($info));
                if ($rc < 0) {
                    $ffi->srl_close($out);
                }
                self::check($ffi, $rc, "info '$name'");
                FFI::memcpy($limits, $info->limits, FFI::sizeof($limits));
            }
        }
        $this->lim = $out;
        $this->limits = $limits;
    }

    public function __destruct()
    {
        $this->close();
    }

    /* Leave every lease still held, then unmap the segment (it stays, with
     * its states).  Idempotent. */
    public function close(): void
    {
        foreach ($this->leases as $weak) {
            $weak->get()?->leave();
        }
        $this->leases = [];
        if ($this->lim !== null) {
            $this->ffi->srl_close($this->lim);
            $this->lim = null;
        }
    }

    /*
     * Decide one request of `cost` permits for `key` (any bytes, 1..4096 of
     * them).  Returns allowed, remaining (requests of cost 1 still allowed),
     * retry_after (whole seconds to wait, rounded up; 0 when allowed), limit,
     * reset (seconds, rounded up, until the key is back at rest), untracked
     * (the table was full), degraded (a lock timed out) and wouldDeny (dry
     * run: allowed, but an enforcing limiter would have denied; remaining
     * and retry_after are then the denial's).
     */
    public function acquire(string $key, int $cost = 1, ?string $tier = null): array
    {
        $lim = $this->handle();
        $d = $this->ffi->new('srl_decision');
        /* A tier by name ('default' is the policy itself): a key of another
         * tier moves to it, keeping its use (srl.h, TIERS). */
        $rc = $tier === null
            ? $this->ffi->srl_acquire($lim, $key, strlen($key), self::u32($cost, 'cost'),
                                      FFI::addr($d))
            : $this->ffi->srl_acquire_tier($lim, $this->tierIndex($tier), $key, strlen($key),
                                           self::u32($cost, 'cost'), FFI::addr($d));
        $this->decided($rc, $d, $this->isConcurrency()
            ? 'acquire() on a concurrency limiter: use enter()' : 'acquire');
        $this->last = $d;
        $this->banStarted($key, $d, $tier);
        return $this->toArray($d);
    }

    /*
     * Wait instead of refusing: take `cost` permits of `key` now for the
     * first instant, at most $maxWaitNs nanoseconds ahead, at which the
     * policy admits them (srl_reserve).  Returns acquire()'s array plus
     * waitNs: the nanoseconds to sleep before acting (0: act now).  Denied
     * (allowed false, nothing taken, retry_after until a reservation with
     * this $maxWaitNs would pass) if the wait would be longer.  A reservation
     * that will not be used goes back with refund($key, $cost).  $maxWaitNs 0
     * is acquire(); token_bucket and gcra can wait, other policies throw
     * SRL_ENOTSUP for $maxWaitNs > 0 (on every store, Redis and fronted too).
     */
    public function reserve(string $key, int $maxWaitNs, int $cost = 1): array
    {
        if ($maxWaitNs < 0) {
            throw new InvalidArgumentException("maxWaitNs must be >= 0, got $maxWaitNs");
        }
        $lim = $this->handle();
        $d = $this->ffi->new('srl_decision');
        $rc = $this->ffi->srl_reserve($lim, $key, strlen($key), self::u32($cost, 'cost'),
                                      $maxWaitNs, FFI::addr($d));
        $this->decided($rc, $d, 'reserve');
        $this->last = $d;
        $this->banStarted($key, $d, null);
        return $this->toArray($d) + ['waitNs' => $d->wait_ns];
    }

    /*
     * Enter one request of `key` on a concurrency limiter (policy
     * "concurrency:N[,max_hold=W]"): an SrlLease if fewer than N requests
     * of the key are in flight (it is now one of them), else null.  Either
     * way $decision receives the decision (as acquire() returns it:
     * remaining = units free, retry_after = 1 or until the oldest unit
     * passes max_hold), decision() returns it, and sendHeaders() answers it
     * (429 with Retry-After when refused).  The unit is given back by
     * $lease->leave(), the lease's destructor (unset, end of scope), close(),
     * or at the latest when the request ends (a shutdown function), whichever
     * comes first.  A lock that timed out decides by on_full: allowed gives
     * a lease that holds nothing (held() false).
     */
    public function enter(string $key, ?array &$decision = null): ?SrlLease
    {
        $lim = $this->handle();
        $d = $this->ffi->new('srl_decision');
        $lease = $this->ffi->new('srl_lease');
        $rc = $this->ffi->srl_enter($lim, $key, strlen($key), FFI::addr($lease), FFI::addr($d));
        $this->decided($rc, $d, $this->isConcurrency()
            ? 'enter' : 'enter() needs a concurrency policy (concurrency:N): use acquire()');
        $this->last = $d;
        $decision = $this->toArray($d);
        if (!$decision['allowed']) {
            return null;
        }
        $l = new SrlLease($this, $lease, $lease->gen !== 0, $decision);
        if ($l->held()) {
            /* Weak references: a lease the script drops is left by its
             * destructor at once, not kept until the end of the request. */
            $weak = WeakReference::create($l);
            $this->leases[spl_object_id($l)] = $weak;
            self::$held[spl_object_id($l)] = $weak;
            if (!self::$atShutdown) {
                self::$atShutdown = true;
                register_shutdown_function(static function (): void {
                    foreach (self::$held as $w) {
                        $w->get()?->leaveQuietly();
                    }
                    self::$held = [];
                });
            }
        }
        return $l;
    }

    /*
     * Give a lease's unit back (SrlLease::leave() calls this).  True if this
     * call gave it back; false if it was left already or srl reclaimed it
     * (held longer than max_hold).  Other errors throw.
     */
    public function leave(SrlLease $lease): bool
    {
        return $lease->leave();
    }

    /* SrlLease's side of leave(): srl_leave on its srl_lease.  @internal */
    public function leaveUnit(SrlLease $lease, FFI\CData $unit): bool
    {
        unset($this->leases[spl_object_id($lease)], self::$held[spl_object_id($lease)]);
        if ($this->lim === null) {
            return false;   /* close() left every lease before it unmapped */
        }
        $rc = $this->ffi->srl_leave($this->lim, FFI::addr($unit));
        if ($rc === SrlError::ENOENT) {
            return false;
        }
        self::check($this->ffi, $rc, 'leave');
        return true;
    }

    /* The decision of the last acquire() or enter(), as they return it; null before one. */
    public function decision(): ?array
    {
        return $this->last === null ? null : $this->toArray($this->last);
    }

    /* The decision acquire() would give, taking nothing; null for an untracked key. */
    public function peek(string $key, int $cost = 1): ?array
    {
        $d = $this->ffi->new('srl_decision');
        $rc = $this->ffi->srl_peek($this->handle(), $key, strlen($key), self::u32($cost, 'cost'),
                                   FFI::addr($d));
        if ($rc === SrlError::ENOENT) {
            return null;
        }
        $this->checkHere($rc, 'peek');
        return $this->toArray($d);
    }

    /*
     * Give back `cost` permits an allowed acquire() of `key` took (the
     * request turned out free, e.g. a login that succeeded when only failed
     * ones count).  Never lifts the key above a fresh one.  False if the key
     * is not tracked (nothing to give back); cost 0 or above the permits
     * throws (SRL_ECOST).
     */
    public function refund(string $key, int $cost = 1): bool
    {
        $rc = $this->ffi->srl_refund($this->handle(), $key, strlen($key), self::u32($cost, 'cost'));
        if ($rc === -7) { /* SRL_ENOENT */
            return false;
        }
        $this->checkHere($rc, 'refund');
        return true;
    }

    /* Forget one key; false if it was not tracked. */
    public function reset(string $key): bool
    {
        $rc = $this->ffi->srl_reset_key($this->handle(), $key, strlen($key));
        if ($rc === SrlError::ENOENT) {
            return false;
        }
        $this->checkHere($rc, 'reset');
        return true;
    }

    /* The segment's counters (capacity, used, allowed, denied, ...,
     * reclaimed: in-flight units freed because their holder died or held
     * them past max_hold; local_denied: with redis, the denials the host
     * answered itself; would_deny: denials dry-run handles allowed, also
     * in denied; exempt: decisions of exempt keys, also in allowed). */
    public function stats(): array
    {
        $s = $this->ffi->new('srl_stats');
        self::check($this->ffi, $this->ffi->srl_stats_get($this->handle(), FFI::addr($s)), 'stats');
        $out = [];
        foreach (['capacity', 'used', 'allowed', 'denied', 'full', 'recovered', 'reset_slots',
                  'evicted', 'timeouts', 'reclaimed', 'local_denied', 'would_deny', 'exempt'] as $f) {
            $out[$f] = $s->$f;
        }
        return $out;
    }

    /*
     * What the handle is now (srl_info): policy (the segment's current
     * policy, as text), capacity, key_display, tier_count, policy_gen (one
     * more per live change), layout_version, flags (srl_info.flags: the
     * SRL_CONFIG_* bits that took effect in this handle's store) and, from
     * it, lockfree, flood_cache and dry_run: true only where the option is
     * in force, not merely asked for ('lockfree' => true on a segment
     * without a gcra tier reads false).
     */
    public function info(): array
    {
        $in = $this->ffi->new('srl_info');
        self::check($this->ffi, $this->ffi->srl_info_get($this->handle(), FFI::addr($in)), 'info');
        $out = ['policy' => $this->format('srl_limits_format', FFI::addr($in->limits))];
        foreach (['capacity', 'key_display', 'tier_count', 'policy_gen', 'layout_version',
                  'flags'] as $f) {
            $out[$f] = $in->$f;
        }
        return $out + [
            'lockfree' => ($in->flags & self::CONFIG_LOCKFREE) !== 0,
            'flood_cache' => ($in->flags & self::CONFIG_FLOOD_CACHE) !== 0,
            'dry_run' => ($in->flags & self::CONFIG_DRY_RUN) !== 0,
        ];
    }

    /*
     * Send the headers of the last acquire(): RateLimit-Policy and
     * RateLimit always, Retry-After and status 429 when it was denied.
     * After enter() (a concurrency limiter): Retry-After and 429 when it
     * was refused, nothing when admitted.
     * Returns whether the request was allowed (so `if (!$srl->sendHeaders())
     * exit;` ends a limited request).  The header values are formatted by
     * the library (srl_format_*), exactly as mod_srl formats them.
     * With dry_run: no header, and true (the request goes on; mod_srl's
     * SrlDryRun sends none either).
     */
    public function sendHeaders(): bool
    {
        if ($this->last === null) {
            throw new LogicException('sendHeaders() before acquire()');
        }
        $d = $this->last;
        if ($this->dryRun) {
            return true;
        }
        /* No RateLimit headers for an in-flight limit: a quota per window is
         * not what it is (mod_srl sends none either). */
        if (!$this->isConcurrency()) {
            /* one item per limit; RateLimit: the binding one */
            header('RateLimit-Policy: ' . $this->format('srl_format_ratelimit_policies',
                                                         FFI::addr($this->limits), $this->token));
            header('RateLimit: ' . $this->format('srl_format_ratelimit_binding',
                                                  FFI::addr($this->limits), FFI::addr($d),
                                                  $this->token));
        }
        if ($d->allowed) {
            return true;
        }
        header('Retry-After: ' . $this->format('srl_format_retry_after', FFI::addr($d)));
        http_response_code(429);
        return false;
    }

    /* Remove the segment's name (processes that have it open keep it). */
    public static function unlink(string $name): void
    {
        $ffi = self::ffi();
        self::check($ffi, $ffi->srl_unlink($name), "unlink '$name'");
    }

    /* Tier name => index, looked up once per name (srl_tier_find). */
    private array $tierIndex = [];

    private function tierIndex(string $tier): int
    {
        if (!isset($this->tierIndex[$tier])) {
            $i = $this->ffi->srl_tier_find($this->handle(), $tier);
            if ($i < 0) {
                throw new SrlException("srl: no tier '$tier' in this limiter", $i);
            }
            $this->tierIndex[$tier] = $i;
        }
        return $this->tierIndex[$tier];
    }

    private function isConcurrency(): bool
    {
        for ($i = 0; $i < $this->limits->count; $i++) {
            if ($this->limits->limit[$i]->algorithm === 4) {   /* SRL_CONCURRENCY */
                return true;
            }
        }
        return false;
    }

    /* After a deciding call: a lock that timed out, or a Redis server that
     * did not answer (SRL_ETIMEDOUT, SRL_ESYS, ...), still decided: the
     * library filled $d from on_full and flagged it degraded; other errors
     * leave it zero and throw. */
    private function decided(int $rc, FFI\CData $d, string $what): void
    {
        if ($rc !== 0 && ($d->flags & self::DECISION_DEGRADED) === 0) {
            $this->checkHere($rc, $what);
        }
    }

    /*
     * Where a decision that starts a penalty= ban (one per ban) is logged:
     * $logger a PSR-3 logger (its log($level, $message, $context)), or a
     * callable($level, $message, $context), or null for error_log(); $level
     * a PSR-3 level ('warning', the default; 'notice', 'error', ...) or null
     * for no log at all.  The message: "srl: ban started: key K, policy P,
     * until YYYY-MM-DDTHH:MM:SSZ" (K's control and non-ASCII bytes as \xNN;
     * until = now in UTC plus the decision's retry_after, rounded up to the
     * second); $context has key, policy and until (a Unix time).
     */
    public static function setBanLog(mixed $logger = null, ?string $level = 'warning'): void
    {
        if ($logger !== null && !is_callable($logger) && !(is_object($logger) &&
                                                           method_exists($logger, 'log'))) {
            throw new InvalidArgumentException('setBanLog: a PSR-3 logger, a callable or null');
        }
        self::$banLogger = $logger;
        self::$banLevel = $level;
    }

    /* The log line of a ban's start (setBanLog), if $d started one. */
    private function banStarted(string $key, FFI\CData $d, ?string $tier): void
    {
        if (($d->flags & self::DECISION_BAN_STARTED) === 0 || self::$banLevel === null) {
            return;
        }
        $limits = $this->limits;
        if ($tier !== null) {
            $t = $this->ffi->new('srl_tier');
            if ($this->ffi->srl_tier_get($this->handle(), $this->tierIndex($tier),
                                         FFI::addr($t)) === 0) {
                $limits = $t->limits;
            }
        }
        $policy = $this->format('srl_limits_format', FFI::addr($limits));
        $shown = preg_replace_callback('/[^\x20-\x7e]|\\\\/', static fn(array $m): string =>
            $m[0] === '\\' ? '\\\\' : sprintf('\\x%02x', ord($m[0])), $key);
        $until = intdiv((int)(microtime(true) * 1e6) * 1000 + $d->retry_after_ns + 999999999,
                        1000000000);
        $msg = sprintf('srl: ban started: key %s, policy %s, until %s', $shown, $policy,
                       gmdate('Y-m-d\TH:i:s\Z', $until));
        $context = ['key' => $key, 'policy' => $policy, 'until' => $until];
        $logger = self::$banLogger;
        if ($logger === null) {
            error_log($msg);
        } elseif (is_object($logger) && method_exists($logger, 'log')) {
            $logger->log(self::$banLevel, $msg, $context);
        } else {
            $logger(self::$banLevel, $msg, $context);
        }
    }

    private function handle(): FFI\CData
    {
        if ($this->lim === null) {
            throw new LogicException('the limiter is closed');
        }
        return $this->lim;
    }

    private function toArray(FFI\CData $d): array
    {
        return [
            'allowed' => $d->allowed !== 0,
            'remaining' => $d->remaining,
            'retry_after' => (int)$this->format('srl_format_retry_after', FFI::addr($d)),
            'retryAfterNs' => $d->retry_after_ns,   /* the same, unrounded */
            'limit' => $d->limit,
            'reset' => intdiv($d->reset_after_ns + 999999999, 1000000000),
            'untracked' => ($d->flags & self::DECISION_UNTRACKED) !== 0,
            'degraded' => ($d->flags & self::DECISION_DEGRADED) !== 0,
            'local' => ($d->flags & self::DECISION_LOCAL) !== 0,
            'wouldDeny' => ($d->flags & self::DECISION_WOULD_DENY) !== 0,
        ];
    }

    /* Call one srl_format_* function with args, then a buffer; its text.
     * 1024 bytes: 4 RateLimit-Policy items of a 200-byte name fit. */
    private function format(string $fn, mixed ...$args): string
    {
        $buf = $this->ffi->new('char[1024]');
        $n = $this->ffi->$fn(...[...$args, $buf, 1024]);
        self::check($this->ffi, $n < 0 ? $n : 0, $fn);
        return FFI::string($buf, $n);
    }

    private static function u32(int $v, string $what): int
    {
        if ($v < 0 || $v > 0xFFFFFFFF) {
            throw new InvalidArgumentException("$what must be 0..4294967295, got $v");
        }
        return $v;
    }

    /* After SRL_EMISMATCH: "; what differs" from the segment's own config
     * (an adopting open with this config's trust), or "" if it cannot be had. */
    private static function mismatchWhy(FFI $ffi, string $name, $cfg): string
    {
        $seg = $ffi->new('srl_limiter *');
        if ($ffi->srl_open_shared($name, FFI::addr($cfg), 4 /* SRL_ADOPT */, FFI::addr($seg)) != 0) {
            return '';
        }
        $info = $ffi->new('srl_info');
        $why = $ffi->new('char[1024]');
        $n = $ffi->srl_info_get($seg, FFI::addr($info)) == 0
            ? $ffi->srl_mismatch_explain_for(FFI::addr($cfg), FFI::addr($info), 3 /* PHP */, $why,
                                             1024) : 0;
        $ffi->srl_close($seg);
        return $n > 0 ? '; ' . FFI::string($why) : '';
    }

    /* An open's failure with its cause: a Redis store's server and what it
     * did (srl_last_error), a refused segment's owner, mode and fix
     * (srl_open_explain; a tiered open leaves srl_last_error "" when its
     * host segment refused it). */
    private static function checkOpen(FFI $ffi, int $rc, string $what, string $name,
                                      FFI\CData $cfg, bool $redis): void
    {
        if ($rc >= 0) {
            return;
        }
        $why = $redis ? self::lastError($ffi) : '';
        if ($why === '' && $rc === SrlError::EACCES) {
            $buf = $ffi->new('char[600]');
            $seg = ($name !== '' && $name[0] === '/') ? $name : "/$name";
            if ($ffi->srl_open_explain($seg, FFI::addr($cfg), $buf, 600) !== SrlError::EINVAL) {
                $why = FFI::string($buf);
            }
        }
        throw new SrlException("srl: $what: " . $ffi->srl_strerror($rc)
                               . ($why !== '' ? ": $why" : ''), $rc);
    }

    /* srl_last_error: this thread's sentence for its last Redis store call. */
    private static function lastError(FFI $ffi): string
    {
        $buf = $ffi->new('char[256]');
        $ffi->srl_last_error($buf, 256);
        return FFI::string($buf);
    }

    /* check() for a call on this handle: on a Redis store the message ends
     * with srl_last_error's sentence (which server, what happened). */
    private function checkHere(int $rc, string $what): void
    {
        if ($rc < 0 && $this->redis && ($why = self::lastError($this->ffi)) !== '') {
            throw new SrlException("srl: $what: " . $this->ffi->srl_strerror($rc) . ": $why",
                                   $rc);
        }
        self::check($this->ffi, $rc, $what);
    }

    private static function check(FFI $ffi, int $rc, string $what): void
    {
        if ($rc < 0) {
            throw new SrlException("srl: $what: " . $ffi->srl_strerror($rc), $rc);
        }
    }
}

/*
 * One unit of an in-flight limit, held from Srl::enter() until it is left.
 * Leaving is idempotent: leave() returns true only for the call that gave
 * the unit back.  The lease keeps its Srl alive (the handle its unit needs);
 * Srl::close() leaves it first if the Srl is closed before.  Not shared
 * between processes: a forked child does not hold its parent's units.
 */
final class SrlLease
{
    private ?Srl $srl;

    /* Made by Srl::enter() only. */
    public function __construct(Srl $srl, private FFI\CData $unit, bool $held,
                                private array $decision)
    {
        $this->srl = $held ? $srl : null;
    }

    public function __destruct()
    {
        $this->leaveQuietly();
    }

    /* Give the unit back; true if this call did, false if it was left already. */
    public function leave(): bool
    {
        $srl = $this->srl;
        if ($srl === null) {
            return false;
        }
        $this->srl = null;   /* before the call: never a second srl_leave */
        return $srl->leaveUnit($this, $this->unit);
    }

    /* leave() for destructors and shutdown functions, which must not throw:
     * an error is logged (error_log) and the unit is left to srl's reclaim. */
    public function leaveQuietly(): void
    {
        try {
            $this->leave();
        } catch (Throwable $e) {
            error_log('srl: leaving an in-flight unit: ' . $e->getMessage());
        }
    }

    /* Whether this lease still holds its unit. */
    public function held(): bool
    {
        return $this->srl !== null;
    }

    /* The decision that admitted it (Srl::enter()'s $decision). */
    public function decision(): array
    {
        return $this->decision;
    }
}
