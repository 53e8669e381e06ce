<?php
/*
 * preload.php - opcache.preload script for php-fpm with ffi.enable=preload.
 *
 * With ffi.enable=preload, FFI may be used only by code the server loaded
 * at startup: it binds srl_ffi.h once, in the master, before the workers
 * fork, so every request finds the declarations as FFI::scope('srl').
 *
 * A master started as root must set opcache.preload_user, and PHP then
 * refuses FFI::load() here: srl.ini therefore also names the header in
 * ffi.preload, which binds it before this script runs.  This script binds
 * it only when that was not done (a master not running as root, started
 * without ffi.preload), and compiles Srl.php into the preloaded code so
 * requests do not parse it again (a `require_once` of it stays harmless).
 */
try {
    FFI::scope('srl');
} catch (FFI\Exception $e) {
    FFI::load(__DIR__ . '/srl_ffi.h');
}
opcache_compile_file(__DIR__ . '/Srl.php');
