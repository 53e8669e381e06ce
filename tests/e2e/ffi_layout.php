<?php
/*
 * ffi_layout.php - FFI's view of php/srl_ffi.h, in ffi_layout.c's format.
 * Usage: php -d ffi.enable=1 ffi_layout.php PHP_DIR
 * Ends with Srl.php's error-code constants (every constant of class
 * SrlError), which ffi_layout.sh compares with srl.h's SRL_ERRNO_MAP.
 */
declare(strict_types=1);

$ffi = FFI::load($argv[1] . '/srl_ffi.h');
foreach (['srl_policy', 'srl_limits', 'srl_decision', 'srl_ticker', 'srl_config', 'srl_tier', 'srl_info',
          'srl_stats',
          'srl_policy_error', 'srl_cidr', 'srl_lease'] as $t) {
    $type = $ffi->type($t);
    printf("%s %d\n", $t, FFI::sizeof($type));
    foreach ($type->getStructFieldNames() as $f) {
        printf("%s.%s %d\n", $t, $f, $type->getStructFieldOffset($f));
    }
}
foreach (['srl_algorithm', 'srl_on_full', 'srl_store_kind'] as $t) {
    printf("%s %d\n", $t, FFI::sizeof($ffi->type($t)));
}

require $argv[1] . '/Srl.php';
foreach ((new ReflectionClass('SrlError'))->getConstants() as $n => $v) {
    printf("SrlError::%s %d\n", $n, $v);
}
