<?php
/*
 * autoload.php - loads the Symfony RateLimiter adapter (Srl\Symfony\*).
 *
 * require it once (composer users may map the namespace Srl\Symfony\ to this
 * directory instead).  It loads Srl.php (harmless when php-fpm preloaded it)
 * and, when Symfony's RateLimiter is not autoloadable yet and Debian's
 * php-symfony-rate-limiter is installed, Debian's autoloader for it.
 */
declare(strict_types=1);

require_once __DIR__ . '/../../Srl.php';

spl_autoload_register(static function (string $class): void {
    $prefix = 'Srl\\Symfony\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = __DIR__ . '/' . substr($class, strlen($prefix)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

if (!interface_exists('Symfony\\Component\\RateLimiter\\LimiterInterface')
    && is_file('/usr/share/php/Symfony/Component/RateLimiter/autoload.php')) {
    require_once '/usr/share/php/Symfony/Component/RateLimiter/autoload.php';
}
