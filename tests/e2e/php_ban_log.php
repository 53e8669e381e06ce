<?php
/*
 * php_ban_log.php - Srl::setBanLog (issue 41 item 4) in one CLI process,
 * run by php_ban_log.sh: a penalty= ban's start is logged exactly once
 * (the denials during the ban log nothing), with the key's display form
 * (control and non-ASCII bytes as \xNN), the policy text and until when
 * (UTC, whole seconds: the clock around the call plus the decision's
 * retry_after); through a callable, a PSR-3 style logger object, and
 * error_log() by default; a level chosen, or null for none.  The windows
 * are an hour: nothing refills while it runs.
 * Prints "ok: ..." / "FAIL: ..." per check and exits 1 if any failed.
 * Environment: SRL_PHP_DIR, SRL_TAG (segment names' suffix), SRL_ERRLOG
 * (the file error_log() writes to, from php -d error_log=).
 */
declare(strict_types=1);

require getenv('SRL_PHP_DIR') . '/Srl.php';

$failed = 0;
function check(string $what, mixed $expected, mixed $actual): void
{
    global $failed;
    if ($expected === $actual) {
        echo "ok: $what\n";
    } else {
        $failed++;
        echo "FAIL: $what: expected ", var_export($expected, true), ", got ",
            var_export($actual, true), "\n";
    }
}

final class Collect
{
    public array $records = [];
    public function log(mixed $level, string|\Stringable $message, array $context = []): void
    {
        $this->records[] = [$level, (string)$message, $context];
    }
}

const POLICY = 'token_bucket:1/1h,penalty=1m..1d';
$tag = getenv('SRL_TAG');
$name = "/phpbanlog-$tag";
$srl = new Srl($name, POLICY, 64);

/* One offence: the token, then the denial that bans; then 5 denials more. */
function offend(Srl $srl, string $key): array
{
    $label = preg_replace('/[^\x20-\x7e]/', '?', $key);
    $d = $srl->acquire($key);
    check("$label: first request allowed", true, $d['allowed']);
    $before = microtime(true);
    $d = $srl->acquire($key);
    $after = microtime(true);
    check("$label: second denied", false, $d['allowed']);
    for ($i = 0; $i < 5; $i++) {
        $srl->acquire($key);
    }
    return [$before, $after];
}

function check_until(string $what, string $msg, float $before, float $after): void
{
    global $failed;
    if (!preg_match('/, until (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$/', $msg, $m)) {
        $failed++;
        echo "FAIL: $what: no until in '$msg'\n";
        return;
    }
    $until = strtotime($m[1]);
    /* retry_after is the token's hour (longer than the 1m ban) */
    $ok = $until >= (int)floor($before) + 3600 && $until <= (int)ceil($after) + 3600 + 1;
    check("$what: until within the call's hour", true, $ok);
}

$calls = [];
Srl::setBanLog(function (string $level, string $msg, array $ctx) use (&$calls): void {
    $calls[] = [$level, $msg, $ctx];
});
[$b, $a] = offend($srl, 'alice');
check('callable: one line for one ban start', 1, count($calls));
check('callable: level', 'warning', $calls[0][0]);
check('callable: message head', 'srl: ban started: key alice, policy ' . POLICY . ', until ',
      substr($calls[0][1], 0, strlen('srl: ban started: key alice, policy ' . POLICY . ', until ')));
check_until('callable', $calls[0][1], $b, $a);
check('callable: context key', 'alice', $calls[0][2]['key']);
check('callable: context policy', POLICY, $calls[0][2]['policy']);

$logger = new Collect();
Srl::setBanLog($logger, 'notice');
[$b, $a] = offend($srl, "\x1b[31m\xffbob\n\\");
check('PSR-3: one line', 1, count($logger->records));
check('PSR-3: level chosen', 'notice', $logger->records[0][0]);
check('PSR-3: key escaped', true,
      str_contains($logger->records[0][1], 'key \x1b[31m\xffbob\x0a\\\\, policy'));
check_until('PSR-3', $logger->records[0][1], $b, $a);

Srl::setBanLog($logger, null);
offend($srl, 'carol');
check('level null: nothing logged', 1, count($logger->records));

Srl::setBanLog();
offend($srl, 'dave');
$lines = file(getenv('SRL_ERRLOG'), FILE_IGNORE_NEW_LINES) ?: [];
$dave = array_values(array_filter($lines, fn($l) => str_contains($l, 'key dave,')));
check('error_log: one line', 1, count($dave));
check('error_log: the message', true,
      str_contains($dave[0] ?? '', 'srl: ban started: key dave, policy ' . POLICY . ', until '));

$threw = false;
try {
    Srl::setBanLog(42);
} catch (InvalidArgumentException $e) {
    $threw = $e->getMessage() === 'setBanLog: a PSR-3 logger, a callable or null';
}
check('setBanLog(42) refused', true, $threw);

$srl->close();
Srl::unlink($name);
exit($failed === 0 ? 0 : 1);
