<?php
/*
 * symfony_app.php - the app of tests/e2e/symfony.sh: a Symfony-style
 * controller limited by Srl\Symfony\SrlRateLimiterFactory, under php-fpm.
 *
 * FastCGI variables (param.php): SRL_PHP_DIR, SF_ID, SF_POLICY, SF_LIMIT,
 * SF_INTERVAL (the windows' interval, the token bucket's rate interval,
 * whose amount is SF_LIMIT), SF_KEY, SF_EXEMPT (the factory's 'exempt'
 * list, comma-separated; none when empty), SRL_SLEEP_MS (pause before
 * answering, so the requests overlap across the workers).
 * Sends what Symfony's documentation has a controller send: X-RateLimit-
 * Remaining, X-RateLimit-Retry-After, X-RateLimit-Limit; a refused request
 * gets 429 and Retry-After (seconds until getRetryAfter(), rounded up).
 * Prints one line:
 *   sf pid=N accepted=0|1 remaining=N limit=N retry_us=N srl=ALLOWED,REMAINING,RETRY_NS,AT_US
 * retry_us: getRetryAfter() in microseconds since the epoch; srl: the srl
 * decision behind it (SrlLimiter::decision(); "none" for another limiter).
 * With SF_EXEMPT, a second line: "sf exempt=0|1" (the decision's exempt).
 */
declare(strict_types=1);

require_once __DIR__ . '/param.php';
require_once param('SRL_PHP_DIR') . '/Srl/Symfony/autoload.php';

use Srl\Symfony\SrlRateLimiterFactory;

$policy = param('SF_POLICY');
$config = ['id' => param('SF_ID'), 'policy' => $policy, 'limit' => (int)param('SF_LIMIT')];
if ($policy === 'token_bucket') {
    $config['rate'] = ['interval' => param('SF_INTERVAL'), 'amount' => (int)param('SF_LIMIT')];
} else {
    $config['interval'] = param('SF_INTERVAL');
}
$exempt = param('SF_EXEMPT', '');
$factory = new SrlRateLimiterFactory($config, ['capacity' => 1024] +
                                     ($exempt !== '' ? ['exempt' => explode(',', $exempt)] : []));

$limiter = $factory->create(param('SF_KEY'));
$limit = $limiter->consume(1);

header('X-RateLimit-Remaining: ' . $limit->getRemainingTokens());
header('X-RateLimit-Retry-After: ' . ($limit->getRetryAfter()->getTimestamp() - time()));
header('X-RateLimit-Limit: ' . $limit->getLimit());
if (!$limit->isAccepted()) {
    http_response_code(429);
    header('Retry-After: ' . max(0, (int)ceil((float)$limit->getRetryAfter()->format('U.u') - microtime(true))));
}
$d = method_exists($limiter, 'decision') ? $limiter->decision() : null;
printf("sf pid=%d accepted=%d remaining=%d limit=%d retry_us=%s srl=%s\n", getmypid(),
       $limit->isAccepted() ? 1 : 0, $limit->getRemainingTokens(), $limit->getLimit(),
       $limit->getRetryAfter()->format('Uu'),
       $d === null ? 'none' : sprintf('%d,%d,%d,%d', $d['allowed'] ? 1 : 0, $d['remaining'],
                                      $d['retryAfterNs'], (int)floor($d['at'] * 1e6)));
if ($exempt !== '') {
    printf("sf exempt=%d\n", $d !== null && $d['exempt'] ? 1 : 0);
}
usleep(1000 * (int)param('SRL_SLEEP_MS', '0'));
