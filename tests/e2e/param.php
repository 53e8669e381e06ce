<?php
/*
 * param.php - how the e2e PHP scripts (limit.php, inflight.php) read their
 * parameters: FastCGI variables under php-fpm (cgi-fcgi passes its
 * environment as such), the environment under the CLI; and the segment
 * they name (SRL_PHP_DIR where Srl.php is, SRL_NAME, SRL_POLICY,
 * SRL_CAPACITY, SRL_KEY_DISPLAY (0); SRL_REDIS: a Redis store's uri
 * instead of a segment), opened by srl_from_params().
 */
declare(strict_types=1);

function param(string $k, ?string $default = null): ?string
{
    if (isset($_SERVER[$k]) && is_string($_SERVER[$k])) {
        return $_SERVER[$k];
    }
    $v = getenv($k);
    return $v === false ? $default : $v;
}

function srl_from_params(): Srl
{
    require_once param('SRL_PHP_DIR') . '/Srl.php';
    $redis = param('SRL_REDIS', '');
    return new Srl(param('SRL_NAME'), param('SRL_POLICY'), (int)param('SRL_CAPACITY'),
                   $redis !== '' ? ['redis' => $redis]
                                 : ['key_display' => (int)param('SRL_KEY_DISPLAY', '0')]);
}
