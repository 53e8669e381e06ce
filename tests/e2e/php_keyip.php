<?php
/*
 * php_keyip.php - Srl::ipKey, Srl::cidr, Srl::cidrMatch, Srl::exempt and
 * Srl::acquireAddr (php/Srl.php over srl_key_ip / srl_cidr_*), in one CLI
 * process (ffi.enable=1), run by php_keyip.sh.
 *
 * Exact key texts (the bytes mod_srl, nginx and Python make), exact
 * exception messages and codes, and acquireAddr on a segment with a limit
 * of 2 a day (nothing refills while it runs): addresses in the exempt
 * ranges are never refused and are counted exactly in stats()['exempt'],
 * the others are limited under their /32 or /64, and a /24 key makes two
 * addresses one client.
 * Prints "ok: ..." / "FAIL: ..." per check and exits 1 if any failed.
 * Environment: SRL_PHP_DIR, SRL_NAME (a segment name of this run).
 */
declare(strict_types=1);

require getenv('SRL_PHP_DIR') . '/Srl.php';

$failed = 0;
function check(string $what, mixed $want, mixed $got): void
{
    global $failed;
    if ($want === $got) {
        echo "ok: $what = " . var_export($got, true) . "\n";
    } else {
        $failed++;
        echo "FAIL: $what: expected " . var_export($want, true) . ", got "
            . var_export($got, true) . "\n";
    }
}
function thrown(callable $f): string
{
    try {
        $f();
        return 'no exception';
    } catch (SrlException $e) {
        return $e->getCode() . ' ' . $e->getMessage();
    }
}

foreach ([[['192.0.2.1'], '192.0.2.1/32'], [['192.0.2.1', 24], '192.0.2.0/24'],
          [['192.0.2.1', 0], '0.0.0.0/0'], [['2001:db8:1:2:3:4:5:6'], '2001:db8:1:2::/64'],
          [['2001:db8:1:2:3:4:5:6', 32, 128], '2001:db8:1:2:3:4:5:6/128'],
          [['2001:db8:1:2:3:4:5:6', 32, 0], '::/0'], [['::ffff:192.0.2.1', 24], '192.0.2.0/24'],
          [['2001:0DB8:0:0:1:0:0:1', 32, 128], '2001:db8::1:0:0:1/128']] as [$args, $want]) {
    check('ipKey(' . implode(', ', $args) . ')', $want, Srl::ipKey(...$args));
}
foreach (['', '01.2.3.4', '[::1]', '::1%lo', '1.2.3.4:80', "1.2.3.4\0x"] as $bad) {
    check("ipKey of a bad address " . addcslashes($bad, "\0"),
          "-1 srl: ipKey: '" . addcslashes($bad, "\0..\37") . "' is not an IPv4 or IPv6 address "
          . "(dotted quad or RFC 4291 text; no port, brackets or zone)",
          thrown(fn() => Srl::ipKey($bad)));
}
check('ipKey with v4 33', '-1 srl: ipKey: prefixes are v4 0..32 and v6 0..128, not v4=33 v6=64',
      thrown(fn() => Srl::ipKey('1.2.3.4', 33)));
check('ipKey with v6 129', '-1 srl: ipKey: prefixes are v4 0..32 and v6 0..128, not v4=32 v6=129',
      thrown(fn() => Srl::ipKey('::1', 32, 129)));

check('cidr 2001:DB8::/32', '2001:db8::/32', Srl::cidr('2001:DB8::/32'));
check('cidr ::1', '::1/128', Srl::cidr('::1'));
check('cidr mapped', '10.0.0.0/8', Srl::cidr('::ffff:10.0.0.0/104'));
foreach (['10.0.0.1/8', '10.0.0.0/33', '10.0.0.0/08', ''] as $bad) {
    check("cidr $bad refused", "-1 srl: '$bad' is not an address range: give ADDRESS or "
          . "ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the address with no bits set past "
          . "the prefix", thrown(fn() => Srl::cidr($bad)));
}
foreach ([['10.0.0.0/8', '10.255.0.1', true], ['10.0.0.0/8', '11.0.0.1', false],
          ['10.0.0.0/8', '::ffff:10.1.1.1', true], ['::1', '::1', true],
          ['::1', '127.0.0.1', false], ['::/0', '1.2.3.4', false],
          ['10.0.0.0/8', 'not an address', false]] as [$r, $a, $want]) {
    check("cidrMatch($r, $a)", $want, Srl::cidrMatch($r, $a));
}

$name = getenv('SRL_NAME');
$srl = new Srl($name, 'token_bucket:2/1d', 64);
$exempt = ['127.0.0.0/8', '::1'];
$got = [];
foreach (['127.0.0.1', '127.0.0.2', '::ffff:127.9.9.9', '::1'] as $a) {
    for ($i = 0; $i < 5; $i++) {
        $d = $srl->acquireAddr($a, $exempt);
        $got[] = ($d['allowed'] ? 'A' : 'D') . ($d['exempt'] ? 'x' : '');
    }
}
check('acquireAddr: 20 from exempt ranges', str_repeat('Ax', 20), implode('', $got));
$st = $srl->stats();
check('stats after the exempt ones', [20, 0, 20], [$st['allowed'], $st['denied'], $st['exempt']]);
check('the client key 127.0.0.1/32 untouched', false, $srl->reset('127.0.0.1/32'));
$got = [];
foreach (['192.0.2.1', '192.0.2.1', '192.0.2.1', '2001:db8::1', '2001:db8::2', '2001:db8::3']
         as $a) {
    $d = $srl->acquireAddr($a, $exempt);
    $got[] = ($d['allowed'] ? 'A' : 'D') . ($d['exempt'] ? 'x' : '');
}
check('acquireAddr outside the ranges: /32 and /64 limited', 'A A D A A D', implode(' ', $got));
$st = $srl->stats();
check('stats now', [24, 2, 20], [$st['allowed'], $st['denied'], $st['exempt']]);
$got = [];
foreach (['198.51.100.1', '198.51.100.2', '198.51.100.3', '198.51.101.1'] as $a) {
    $got[] = $srl->acquireAddr($a, [], 24)['allowed'] ? 'A' : 'D';
}
check('acquireAddr with a /24: one client', 'A A D A', implode(' ', $got));
check('a bad range is refused', "-1 srl: '10.0.0.1/8' is not an address range: give ADDRESS or "
      . "ADDRESS/PREFIX (10.0.0.0/8, 2001:db8::/32, ::1), the address with no bits set past the "
      . "prefix", thrown(fn() => $srl->acquireAddr('10.1.1.1', ['10.0.0.1/8'])));
$srl->exempt('k');
for ($i = 0; $i < 4; $i++) {
    $srl->acquire('k');
}
check('exempt(k): 4 admitted of a limit of 2', true, $srl->acquire('k')['allowed']);
$srl->exempt('k', false);
check('exempt(k, false): limited again', false, $srl->acquire('k')['allowed'] &&
      $srl->acquire('k')['allowed'] && $srl->acquire('k')['allowed']);
$srl->close();
Srl::unlink($name);
exit($failed ? 1 : 0);
