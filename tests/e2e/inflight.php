<?php
/*
 * inflight.php - the PHP side of the in-flight e2e test (php_concurrency.sh):
 * Srl::enter() on a concurrency limiter, then one way of ending.
 *
 * Parameters (param.php): the segment's, SRL_KEY, and
 *   SRL_CTL   a directory the worker may write: once admitted the script
 *             creates SRL_CTL/in.TAG, and its own shutdown function (run
 *             after Srl's, which enter() registered first) SRL_CTL/down.TAG
 *   SRL_REQ   TAG (default: the pid)
 *   SRL_MODE  hold   wait until SRL_CTL/release exists, then answer
 *             throw  throw an uncaught exception
 *             fatal  die of a fatal error (memory exhausted)
 *             exit   call exit() in the middle
 *             unset  unset the lease, report what one more enter would get (peek)
 * Prints "srl pid=N allowed=0|1 remaining=N retry_after=N" and, refused, the
 * 429 headers (Srl::sendHeaders()).
 */
declare(strict_types=1);

require_once __DIR__ . '/param.php';

$srl = srl_from_params();
$tag = param('SRL_REQ', (string)getmypid());   /* names this request's files */
$key = param('SRL_KEY');
$ctl = param('SRL_CTL');
$lease = $srl->enter($key, $d);
$line = sprintf("srl pid=%d allowed=%d remaining=%d retry_after=%d\n", getmypid(),
                $d['allowed'] ? 1 : 0, $d['remaining'], $d['retry_after']);
if ($lease === null) {
    $srl->sendHeaders();
    echo $line;
    exit;
}
touch("$ctl/in.$tag");
register_shutdown_function(static function () use ($ctl, $tag): void {
    touch("$ctl/down.$tag");
});
echo $line;
switch (param('SRL_MODE', 'hold')) {
    case 'hold':
        while (!file_exists("$ctl/release")) {
            usleep(50000);
            clearstatcache();
        }
        break;
    case 'throw':
        throw new RuntimeException('inflight.php: thrown on purpose');
    case 'fatal':
        /* A fatal error marks every object destructed: no destructor runs,
         * only shutdown functions (after an uncaught exception both run). */
        ini_set('memory_limit', '16M');
        echo strlen(str_repeat('x', 64 << 20));
        break;
    case 'exit':
        exit;
    case 'unset':
        unset($lease);
        /* peek: whether one more enter would be admitted, and what it would leave */
        $p = $srl->peek($key);
        echo 'after unset: ', $p === null ? 'untracked'
            : sprintf('allowed=%d remaining=%d', $p['allowed'] ? 1 : 0, $p['remaining']), "\n";
        break;
}
