/*
 * ngx_http_srl_modules.c - the module list a dynamic nginx module exports.
 *
 * load_module reads these three symbols from the .so (ngx_load_module):
 * the modules it holds, their names, and their order among the filters
 * (none here).  nginx's configure writes the same file for
 * --add-dynamic-module (objs/ngx_*_modules.c); meson builds the module
 * itself, so it is written by hand.  Nothing else may go in this file.
 */
#include <ngx_config.h>
#include <ngx_core.h>

extern ngx_module_t ngx_http_srl_module;

ngx_module_t *ngx_modules[] = {
    &ngx_http_srl_module,
    NULL
};

char *ngx_module_names[] = {
    "ngx_http_srl_module",
    NULL
};

char *ngx_module_order[] = {
    NULL
};
