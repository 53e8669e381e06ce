<?php
/*
 * symfony_unit.php - Srl\Symfony (php/Srl/Symfony) against Symfony's own
 * limiters, in one CLI process (ffi.enable=1), run by symfony_unit.sh.
 *
 * Each policy gets an exact sequence of consume() / reserve() / reset()
 * calls, made once through SrlRateLimiterFactory (an srl segment) and once
 * through Symfony's RateLimiterFactory with an InMemoryStorage.  Checked:
 *   - isAccepted() and getRemainingTokens() of every answer, for both;
 *   - each srl answer agrees with srl itself: getRemainingTokens() is what
 *     a second handle on the segment peeks, getRetryAfter() is the
 *     decision's instant plus its retry_after (to the microsecond, rounded up);
 *   - getRetryAfter() against the expected wait, bounded by the clock
 *     readings around the call (no sleeps; windows of 20 min .. a day, so
 *     nothing refills while the test runs); where srl and Symfony differ
 *     (token refill in steps, window alignment, fixed_window's reserve),
 *     both values are asserted, as php/README.md describes them;
 *   - the exceptions (MaxWaitDurationExceededException with its RateLimit,
 *     ReserveNotSupportedException, InvalidArgumentException) and the
 *     config errors, which are Symfony's own classes and messages.
 * Prints "ok: ..." / "FAIL: ..." per check and exits 1 if any failed.
 * Environment: SRL_PHP_DIR, SRL_TAG (segment names' suffix, unique per run),
 * SRL_REDIS_URI (a redis-server symfony_unit.sh started: 'exempt' there).
 */
declare(strict_types=1);

require getenv('SRL_PHP_DIR') . '/Srl/Symfony/autoload.php';

use Srl\Symfony\SrlRateLimiterFactory;
use Symfony\Component\RateLimiter\Exception\MaxWaitDurationExceededException;
use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Policy\NoLimiter;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\InMemoryStorage;

$failed = 0;
function show(mixed $v): string
{
    return preg_replace('/\s+/', ' ', var_export($v, true));
}
function check(string $what, mixed $expected, mixed $actual): void
{
    global $failed;
    if ($expected === $actual) {
        echo "ok: $what = ", show($actual), "\n";
    } else {
        $failed++;
        echo "FAIL: $what: expected ", show($expected), ", got ", show($actual), "\n";
    }
}
/* LOW <= ACTUAL <= HIGH (floats, seconds) */
function check_in(string $what, float $low, float $high, float $actual): void
{
    global $failed;
    if ($actual >= $low && $actual <= $high) {
        printf("ok: %s = %.6f (in %.6f..%.6f)\n", $what, $actual, $low, $high);
    } else {
        $failed++;
        printf("FAIL: %s: expected %.6f..%.6f, got %.6f\n", $what, $low, $high, $actual);
    }
}
/* What $f() throws: "Class: message", or "no exception". */
function thrown(callable $f): string
{
    try {
        $f();
        return 'no exception';
    } catch (Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage();
    }
}
function secs(DateTimeImmutable $t): float
{
    return (float)$t->format('U.u');
}

$tag = getenv('SRL_TAG') ?: (string)getmypid();
$segments = [];
/* [srl factory, symfony factory] for one config */
function factories(array $config): array
{
    global $segments;
    $srl = new SrlRateLimiterFactory($config, ['capacity' => 64]);
    if ($srl->srlPolicy() !== null) {
        $segments[] = $srl->segment();
    }
    return [$srl, new RateLimiterFactory($config, new InMemoryStorage())];
}

/*
 * One consume() on both limiters: checks acceptance and remaining of both,
 * srl's answer against srl (peek on a second handle $view, the decision's
 * retry_after); returns [srl RateLimit, symfony RateLimit, t0, t1] with
 * t0, t1 the wall clock just before and after srl's call.
 */
function step(string $what, LimiterInterface $a, LimiterInterface $b, Srl $view, string $key,
              int $tokens, bool $accepted, int $remaining): array
{
    $t0 = microtime(true);
    $ra = $a->consume($tokens);
    $t1 = microtime(true);
    $rb = $b->consume($tokens);
    check("$what: srl accepted", $accepted, $ra->isAccepted());
    check("$what: symfony accepted", $accepted, $rb->isAccepted());
    check("$what: srl remaining", $remaining, $ra->getRemainingTokens());
    check("$what: symfony remaining", $remaining, $rb->getRemainingTokens());
    $d = $a->decision();
    check("$what: srl remaining = srl_peek's on another handle", free($view, $key),
          $ra->getRemainingTokens());
    $us = (int)floor($d['at'] * 1e6) + intdiv($d['retryAfterNs'] + 999, 1000);
    check("$what: getRetryAfter() = the decision's instant + retry_after",
          sprintf('%d.%06d', intdiv($us, 1000000), $us % 1000000), $ra->getRetryAfter()->format('U.u'));
    return [$ra, $rb, $t0, $t1];
}

$view = fn (SrlRateLimiterFactory $f) => new Srl($f->segment(), $f->srlPolicy(), 64);
/* Tokens free now for KEY, as a peek on handle $view sees them (a peek of 1
 * answers what would be left after it: one less when it passes). */
function free(Srl $view, string $key): ?int
{
    $d = $view->peek($key);
    return $d === null ? null : $d['remaining'] + ($d['allowed'] ? 1 : 0);
}
/* srl's clock for these policies is CLOCK_MONOTONIC_COARSE: each reading up
 * to one tick (4 ms at HZ=250) behind, so a wait it measures from the
 * instant it started may be that much longer or shorter. */
const COARSE = 0.011;

// ------------------------------------------------------------ token_bucket
// limit 5, one token per 20 minutes
[$fs, $fy] = factories(['id' => "unit-tb-$tag", 'policy' => 'token_bucket', 'limit' => 5,
                        'rate' => ['interval' => '20 minutes', 'amount' => 1]]);
check('token_bucket: srl policy', 'token_bucket:1/1200s,burst=5', $fs->srlPolicy());
check('token_bucket: segment', "/symfony.unit-tb-$tag.token_bucket", $fs->segment());
$a = $fs->create('alice');
$b = $fy->create('alice');
$v = $view($fs);
$key = "unit-tb-$tag-alice";   /* srl's key is Symfony's storage id: ID-KEY */
$tFirst = microtime(true);
step('tb 1 consume(2)', $a, $b, $v, $key, 2, true, 3);
[$ra] = step('tb 2 consume(2)', $a, $b, $v, $key, 2, true, 1);
check('tb 2: accepted: getRetryAfter() is the decision instant', true,
      abs(secs($ra->getRetryAfter()) - $a->decision()['at']) < 1e-5);
check('tb 2: getLimit() is the burst', 5, $ra->getLimit());
[$ra, $rb, $t0, $t1] = step('tb 3 consume(2), one token short', $a, $b, $v, $key, 2, false, 1);
// srl: until one more token, counted from the bucket's first refill (its
// first request); Symfony: ceil(1 / amount) whole intervals from now.
check_in('tb 3: srl retry after (one token from the first request)', 1200 - ($t1 - $tFirst) - COARSE, 1200 + COARSE,
         secs($ra->getRetryAfter()) - $t0);
check_in('tb 3: symfony retry after (whole seconds from its now, after t1)', floor($t1) + 1200,
         microtime(true) + 1200, $rb->getRetryAfter()->getTimestamp());
step('tb 4 consume(1)', $a, $b, $v, $key, 1, true, 0);
step('tb 5 consume(1), empty', $a, $b, $v, $key, 1, false, 0);
// reserve: 1 token in at most 1000 s is refused by both, with the RateLimit
// saying when the token is free
foreach (['srl' => $a, 'symfony' => $b] as $who => $l) {
    $t0 = microtime(true);
    try {
        $l->reserve(1, 1000.0);
        check("tb reserve(1, 1000): $who throws", 'MaxWaitDurationExceededException', 'no exception');
    } catch (MaxWaitDurationExceededException $e) {
        check("tb reserve(1, 1000): $who throws", 'The rate limiter wait time ("1200" seconds) is longer '
              . 'than the provided maximum time ("1000" seconds).', $e->getMessage());
        $rl = $e->getRateLimit();
        check("tb reserve(1, 1000): $who RateLimit accepted", false, $rl->isAccepted());
        check("tb reserve(1, 1000): $who RateLimit remaining", 0, $rl->getRemainingTokens());
        check_in("tb reserve(1, 1000): $who RateLimit retry after", 1200 - (microtime(true) - $tFirst) - 1,
                 1200 + COARSE, secs($rl->getRetryAfter()) - $t0);
    }
}
// 1 token within 1500 s: reserved for ~1200 s ahead, not "accepted", 0 left;
// the next one would wait ~2400 s: refused at 1500, reserved at 3000
foreach (['srl' => $a, 'symfony' => $b] as $who => $l) {
    $t0 = microtime(true);
    $r = $l->reserve(1, 1500.0);
    check_in("tb reserve(1, 1500): $who time to act", 1200 - (microtime(true) - $tFirst) - 1,
             1200 + COARSE + (microtime(true) - $t0), $r->getTimeToAct() - $t0);
    check("tb reserve(1, 1500): $who RateLimit accepted (a wait is not)", false,
          $r->getRateLimit()->isAccepted());
    check("tb reserve(1, 1500): $who RateLimit remaining", 0, $r->getRateLimit()->getRemainingTokens());
    check("tb second reserve(1, 1500): $who", MaxWaitDurationExceededException::class,
          explode(':', thrown(fn () => $l->reserve(1, 1500.0)))[0]);
    $t0 = microtime(true);
    $r = $l->reserve(1, 3000.0);
    check_in("tb reserve(1, 3000): $who time to act", 2400 - (microtime(true) - $tFirst) - 1,
             2400 + COARSE + (microtime(true) - $t0), $r->getTimeToAct() - $t0);
    $six = 'InvalidArgumentException: Cannot reserve more tokens (6) than the burst size of the rate limiter (5).';
    check("tb reserve(6): $who", $six, thrown(fn () => $l->reserve(6)));
    check("tb consume(6): $who", $six, thrown(fn () => $l->consume(6)));
}
check('tb srl reserve(1, 1500) in srl\'s decision: waitNs > 0', true, $a->decision()['waitNs'] > 0);
$other = $fs->create('bob');
check('tb another key is its own bucket: consume(5)', true, $other->consume(5)->isAccepted());
$a->reset();
$b->reset();
check('tb reset(): srl forgets the key', null, $v->peek($key));
step('tb after reset() consume(5)', $a, $b, $v, $key, 5, true, 0);
check('tb consume(0): srl accepted, remaining', [true, 0],
      [$a->consume(0)->isAccepted(), $a->consume(0)->getRemainingTokens()]);

// A refill of several tokens per interval: srl refills them evenly over the
// interval (5 an hour: one each 720 s), Symfony all at once at its end.
[$fs, $fy] = factories(['id' => "unit-tb5-$tag", 'policy' => 'token_bucket', 'limit' => 10,
                        'rate' => ['interval' => '1 hour', 'amount' => 5]]);
check('token_bucket 10, 5/h: srl policy', 'token_bucket:5/3600s,burst=10', $fs->srlPolicy());
$a = $fs->create('k');
$b = $fy->create('k');
$v = $view($fs);
$tFirst = microtime(true);
step('tb5 1 consume(10)', $a, $b, $v, "unit-tb5-$tag-k", 10, true, 0);
[$ra, $rb, $t0, $t1] = step('tb5 2 consume(1)', $a, $b, $v, "unit-tb5-$tag-k", 1, false, 0);
check_in('tb5 2: srl retry after: one token, 3600 / 5 s', 720 - ($t1 - $tFirst) - COARSE, 720 + COARSE,
         secs($ra->getRetryAfter()) - $t0);
check_in('tb5 2: symfony retry after: the whole interval', floor($t1) + 3600, microtime(true) + 3600,
         $rb->getRetryAfter()->getTimestamp());

// ---------------------------------------------------------- sliding_window
// limit 4 per W seconds; W chosen so that srl's current window (aligned to
// multiples of W on CLOCK_MONOTONIC, which hrtime() reads) has > 60 s
// behind it and > 600 s ahead: the test runs inside one window.
$W = 0;
foreach ([86400, 90000, 93600, 97200] as $w) {
    $in = intdiv(hrtime(true), 1000000000) % $w;
    if ($in >= 60 && $in <= $w - 600) {
        $W = $w;
        break;
    }
}
check('sliding_window: a window with room found', true, $W > 0);
[$fs, $fy] = factories(['id' => "unit-sw-$tag", 'policy' => 'sliding_window', 'limit' => 4,
                        'interval' => "$W seconds"]);
check('sliding_window: srl policy', "sliding_counter:4/{$W}s", $fs->srlPolicy());
$a = $fs->create('k');
$b = $fy->create('k');
$v = $view($fs);
$key = "unit-sw-$tag-k";
$tFirst = microtime(true);
step('sw 1 consume(1)', $a, $b, $v, $key, 1, true, 3);
step('sw 2 consume(1)', $a, $b, $v, $key, 1, true, 2);
step('sw 3 consume(2)', $a, $b, $v, $key, 2, true, 0);
$m0 = hrtime(true);
[$ra, $rb, $t0, $t1] = step('sw 4 consume(1), full', $a, $b, $v, $key, 1, false, 0);
$m1 = hrtime(true);
// srl: the next aligned window (1 ns into it, where the previous window's
// 4 weigh just under 4); the coarse clock may read up to 10 ms behind.
// Symfony: the end of its window, W after the key's first request.
$toNext = fn (int $m) => ($W * 1000000000 - $m % ($W * 1000000000)) / 1e9;
check_in('sw 4: srl retry after: the start of the next aligned window', $toNext($m1),
         $toNext($m0) + COARSE, secs($ra->getRetryAfter()) - $t0);
check_in('sw 4: symfony retry after: W after the first request', $tFirst + $W - 0.001,
         $t1 + $W, secs($rb->getRetryAfter()));
step('sw 5 consume(5), above the limit: refused, not thrown', $a, $b, $v, $key, 5, false, 0);
foreach (['srl' => $a, 'symfony' => $b] as $who => $l) {
    check("sw reserve(): $who", ReserveNotSupportedException::class,
          explode(':', thrown(fn () => $l->reserve(1)))[0]);
    check("sw consume(0): $who accepted", true, $l->consume(0)->isAccepted());
    $l->reset();
}
step('sw after reset() consume(4)', $a, $b, $v, $key, 4, true, 0);

// ------------------------------------------------------------ fixed_window
[$fs, $fy] = factories(['id' => "unit-fw-$tag", 'policy' => 'fixed_window', 'limit' => 3,
                        'interval' => '1 hour']);
check('fixed_window: srl policy', 'fixed_window:3/3600s', $fs->srlPolicy());
$a = $fs->create('k');
$b = $fy->create('k');
$v = $view($fs);
$key = "unit-fw-$tag-k";
$tFirst = microtime(true);
step('fw 1 consume(1)', $a, $b, $v, $key, 1, true, 2);
step('fw 2 consume(2)', $a, $b, $v, $key, 2, true, 0);
[$ra, $rb, $t0, $t1] = step('fw 3 consume(1), full', $a, $b, $v, $key, 1, false, 0);
check_in('fw 3: srl retry after: an hour after the first request', $tFirst + 3600 - COARSE,
         $t1 + 3600 + COARSE, secs($ra->getRetryAfter()));
check_in('fw 3: symfony retry after: an hour after the first request (whole seconds)',
         floor($tFirst) + 3600 - 1, $t1 + 3601, secs($rb->getRetryAfter()));
foreach (['srl' => $a, 'symfony' => $b] as $who => $l) {
    check("fw reserve(1, 0): $who", MaxWaitDurationExceededException::class,
          explode(':', thrown(fn () => $l->reserve(1, 0.0)))[0]);
    check("fw reserve(4): $who", 'InvalidArgumentException: Cannot reserve more tokens (4) than the size of '
          . 'the rate limiter (3).', thrown(fn () => $l->reserve(4)));
}
// Symfony's fixed window reserves by counting the tokens in the current
// window (past its limit, lost at its end); srl keeps no future admission.
check('fw reserve(1) that must wait: srl', ReserveNotSupportedException::class,
      explode(':', thrown(fn () => $a->reserve(1)))[0]);
check('fw reserve(1) that must wait: symfony waits an hour', true,
      $b->reserve(1)->getWaitDuration() > 3590);
$a->reset();
check('fw reserve(1) that needs no wait: srl, accepted at once', [true, 0.0],
      [$a->reserve(1)->getRateLimit()->isAccepted(), $a->reserve(1)->getWaitDuration()]);
check('fw after reset(): srl remaining', 1, free($v, $key));

// ------------------------------------------------------------------ exempt
// fixed_window 2 an hour; exempt: two ranges, a bare address, an exact key.
// An exempt key is never refused and each of its decisions is counted in
// the segment's exempt (and allowed); an address in a range is decided
// under the range's key, "ID exempt RANGE" (one slot per range; no Symfony
// key, always "ID-KEY", can be spelled as it: the key '10.0.0.0/8' is limited).
$exempt = ['10.0.0.0/8', '2001:DB8::/32', '::1', 'partner-key'];
$fs = new SrlRateLimiterFactory(['id' => "unit-ex-$tag", 'policy' => 'fixed_window', 'limit' => 2,
                                 'interval' => '1 hour'], ['capacity' => 64, 'exempt' => $exempt]);
$segments[] = $fs->segment();
$v = new Srl($fs->segment(), $fs->srlPolicy(), 64);
/* [accepted of $n consume(1) of $key, its last decision's exempt], by factory $f */
$acceptedBy = function (SrlRateLimiterFactory $f, string $key, int $n): array {
    $l = $f->create($key);
    $yes = 0;
    for ($i = 0; $i < $n; $i++) {
        $yes += $l->consume(1)->isAccepted() ? 1 : 0;
    }
    return [$yes, $l->decision()['exempt']];
};
$accepted = fn (string $key, int $n): array => $acceptedBy($fs, $key, $n);
foreach ([
    // key, requests, accepted, exempt
    ['10.1.2.3', 5, 5, true], ['10.200.0.9', 4, 4, true], ['::ffff:10.0.0.5', 3, 3, true],
    ['2001:db8:1::7', 3, 3, true], ['::1', 3, 3, true], ['partner-key', 6, 6, true],
    ['11.0.0.1', 4, 2, false], ['2001:db9::7', 3, 2, false], ['partner-key2', 3, 2, false],
    ['10.0.0.0/8', 3, 2, false],   /* the range's text as a key is a key like any other */
] as [$key, $n, $want, $ex]) {
    check("exempt: $key, $n requests: accepted, decision's exempt", [$want, $ex], $accepted($key, $n));
}
$st = $v->stats();
check('exempt: stats exempt, allowed, denied (the segment\'s counts)', [24, 24 + 8, 5],
      [$st['exempt'], $st['allowed'], $st['denied']]);
check('exempt: an address in a range is decided under the range\'s key (tracked)', true,
      $v->peek("unit-ex-$tag exempt 10.0.0.0/8") !== null);
check('exempt: ... and its own key is untouched (not tracked)', null, $v->peek("unit-ex-$tag-10.1.2.3"));
check('exempt: the IPv6 range in srl\'s form', true, $v->peek("unit-ex-$tag exempt 2001:db8::/32") !== null);
$l = $fs->create('partner-key');
$rl = $l->consume(2);
check('exempt: consume(2) of an exempt key: accepted, remaining (its policy\'s, untouched)', [true, 0],
      [$rl->isAccepted(), $rl->getRemainingTokens()]);
check('exempt: more tokens than the limit is still Symfony\'s error',
      'InvalidArgumentException: Cannot reserve more tokens (3) than the size of the rate limiter (2).',
      thrown(fn () => $l->consume(3)));
$l->reset();
check('exempt: after reset() still exempt', [3, true], $accepted('partner-key', 3));
check('exempt: reserve(1) of an exempt key: accepted at once', [true, 0.0],
      [$l->reserve(1)->getRateLimit()->isAccepted(), $l->reserve(1)->getWaitDuration()]);
check('exempt: stats exempt after consume(2), reset, 3 consumes, 2 reserves', 24 + 1 + 3 + 2,
      $v->stats()['exempt']);
// config errors, naming the entry
foreach ([
    'a string, not a list' => ['10.0.0.0/8', 'InvalidArgumentException: rate limiter "e": exempt must be '
        . 'a list of keys and address ranges ([\'10.0.0.0/8\', \'::1\', \'partner-key\']), got string'],
    'bits past the prefix' => [['10.0.0.1/8'], 'InvalidArgumentException: rate limiter "e": exempt: '
        . '\'10.0.0.1/8\' is not an address range: give ADDRESS or ADDRESS/PREFIX (10.0.0.0/8, '
        . '2001:db8::/32, ::1), the address with no bits set past the prefix'],
    'a prefix too long' => [['::1/129'], 'InvalidArgumentException: rate limiter "e": exempt: \'::1/129\' '
        . 'is not an address range: give ADDRESS or ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the '
        . 'address with no bits set past the prefix'],
    'an empty entry' => [[''], 'InvalidArgumentException: rate limiter "e": exempt entries are non-empty '
        . 'strings (a key or an address range), got \'\''],
    'a number' => [[10], 'InvalidArgumentException: rate limiter "e": exempt entries are non-empty '
        . 'strings (a key or an address range), got 10'],
] as $what => [$list, $want]) {
    check("exempt config error, $what", $want, thrown(fn () => new SrlRateLimiterFactory(
        ['id' => 'e', 'policy' => 'fixed_window', 'limit' => 1, 'interval' => '1 hour'],
        ['exempt' => $list])));
}

// exempt on a Redis store (which keeps no exemptions): accepted here, never
// sent to srl (nothing tracked under the range's key), the others limited.
$uri = getenv('SRL_REDIS_URI');
check('exempt on Redis: SRL_REDIS_URI given', true, is_string($uri) && $uri !== '');
$fs = new SrlRateLimiterFactory(['id' => "unit-exr-$tag", 'policy' => 'token_bucket', 'limit' => 2,
                                 'rate' => ['interval' => '1 hour', 'amount' => 2]],
                                ['capacity' => 64, 'exempt' => ['10.0.0.0/8', 'partner-key'],
                                 'redis' => (string)$uri]);
$segments[] = $fs->segment();
foreach ([['10.1.2.3', 5, 5, true], ['partner-key', 4, 4, true], ['11.0.0.1', 3, 2, false]]
         as [$key, $n, $want, $ex]) {
    check("exempt on Redis: $key, $n requests: accepted, decision's exempt", [$want, $ex],
          $acceptedBy($fs, $key, $n));
}
$l = $fs->create('10.1.2.3');
$rl = $l->consume(2);
check('exempt on Redis: consume(2): accepted, remaining the limit, decision exempt', [true, 2, true],
      [$rl->isAccepted(), $rl->getRemainingTokens(), $l->decision()['exempt']]);
check('exempt on Redis: reserve(1): accepted at once', [true, 0.0],
      [$l->reserve(1)->getRateLimit()->isAccepted(), $l->reserve(1)->getWaitDuration()]);
$v = new Srl($fs->segment(), $fs->srlPolicy(), 64, ['redis' => (string)$uri]);
check('exempt on Redis: the range\'s key never reached srl', null, $v->peek("unit-exr-$tag exempt 10.0.0.0/8"));
check('exempt on Redis: nor the exact key', null, $v->peek("unit-exr-$tag-partner-key"));
check('exempt on Redis: the limited key is srl\'s (none left)', 0, free($v, "unit-exr-$tag-11.0.0.1"));

// ---------------------------------------------------------------- no_limit
[$fs] = factories(['id' => "unit-nl-$tag", 'policy' => 'no_limit']);
$l = $fs->create('k');
check('no_limit: Symfony\'s NoLimiter', NoLimiter::class, get_class($l));
check('no_limit: consume(1000) accepted', true, $l->consume(1000)->isAccepted());

// ------------------------------------------------- config errors, Symfony's
$err = fn (array $c) => [thrown(fn () => new SrlRateLimiterFactory($c)),
                         thrown(fn () => new RateLimiterFactory($c, new InMemoryStorage()))];
foreach ([
    'unknown option' => ['id' => 'e', 'policy' => 'fixed_window', 'limit' => 1, 'interval' => '1 hour',
                         'limt' => 2],
    'unknown policy' => ['id' => 'e', 'policy' => 'leaky_bucket', 'limit' => 1],
    'no policy' => ['id' => 'e'],
    'limit a string' => ['id' => 'e', 'policy' => 'fixed_window', 'limit' => '5', 'interval' => '1 hour'],
    'bad interval' => ['id' => 'e', 'policy' => 'fixed_window', 'limit' => 5, 'interval' => 'one hour'],
] as $what => $c) {
    [$mine, $theirs] = $err($c);
    check("config error, $what: Symfony's class and message", $theirs, $mine);
}
check('config error: limit 0', 'InvalidArgumentException: rate limiter "e": limit must be at least 1 '
      . '(policy fixed_window), got 0',
      thrown(fn () => new SrlRateLimiterFactory(['id' => 'e', 'policy' => 'fixed_window', 'limit' => 0,
                                                 'interval' => '1 hour'])));
check('config error: token_bucket without rate', 'InvalidArgumentException: rate limiter "e": '
      . 'token_bucket needs rate => [\'interval\' => ..., \'amount\' => N]',
      thrown(fn () => new SrlRateLimiterFactory(['id' => 'e', 'policy' => 'token_bucket', 'limit' => 5])));
// modify('+1 parsec') reads "parsec" as nothing: Symfony takes a 0 s window
check('config error: an interval of 0 s (Symfony takes it)', ['InvalidArgumentException: interval "1 parsec" '
      . 'is 0 seconds: srl takes 1 second .. 3660 days', 'no exception'],
      $err(['id' => 'e', 'policy' => 'fixed_window', 'limit' => 5, 'interval' => '1 parsec']));
check('config: an interval in a calendar unit is fixed (1 month = 31 days)', 31 * 86400,
      SrlRateLimiterFactory::intervalSeconds('1 month'));
check('config: an id outside [A-Za-z0-9._-] gets a hashed segment name',
      '/symfony.api_v1.' . substr(sha1('api/v1'), 0, 12) . '.sliding_window',
      (new SrlRateLimiterFactory(['id' => 'api/v1', 'policy' => 'sliding_window', 'limit' => 1,
                                  'interval' => '1 hour']))->segment());
check('config: an srl option typo is refused by Srl, naming it', 'InvalidArgumentException: unknown option',
      substr(thrown(fn () => (new SrlRateLimiterFactory(['id' => "unit-typo-$tag", 'policy' => 'sliding_window',
             'limit' => 1, 'interval' => '1 hour'], ['key_dispaly' => 8]))->create('k')), 0, 40));

foreach ($segments as $s) {
    Srl::unlink($s);
}
echo "symfony_unit.php: ", $failed === 0 ? 'all passed' : "$failed failed", "\n";
exit($failed === 0 ? 0 : 1);
