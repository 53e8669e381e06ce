<?php
/*
 * limit.php - the PHP side of the e2e tests: acquire through Srl.php.
 *
 * Run by php-fpm (through cgi-fcgi: the parameters come as FastCGI
 * variables) or by the CLI (the same names in the environment):
 *   SRL_PHP_DIR  where Srl.php is        SRL_KEY     the key
 *   SRL_NAME, SRL_POLICY, SRL_CAPACITY, SRL_KEY_DISPLAY (0)   the segment
 *   SRL_REDIS    a Redis uri: the store there instead ('' or unset: none)
 *   SRL_REPEAT   acquires to make (1)    SRL_SLEEP_MS pause after them (0)
 * Prints one line per acquire:
 *   srl pool=P pid=N allowed=0|1 remaining=N retry_after=N limit=N local=0|1 ffi=scope|load
 * (local: answered by the host tier, see 'redis'; ffi: how Srl.php found
 * the C declarations, see Srl::binding())
 * and, under php-fpm, sends the headers of the last decision (429 if denied).
 */
declare(strict_types=1);

require_once __DIR__ . '/param.php';

$srl = srl_from_params();
$pool = getenv('SRL_POOL') ?: 'none';
$n = (int)param('SRL_REPEAT', '1');
$lines = '';
for ($i = 0; $i < $n; $i++) {
    $d = $srl->acquire(param('SRL_KEY'));
    $lines .= sprintf("srl pool=%s pid=%d allowed=%d remaining=%d retry_after=%d limit=%d "
                      . "local=%d ffi=%s\n", $pool, getmypid(), $d['allowed'] ? 1 : 0,
                      $d['remaining'], $d['retry_after'], $d['limit'], $d['local'] ? 1 : 0,
                      Srl::binding());
}
if (PHP_SAPI !== 'cli') {
    $srl->sendHeaders();   /* before any output */
}
echo $lines;
usleep(1000 * (int)param('SRL_SLEEP_MS', '0'));
