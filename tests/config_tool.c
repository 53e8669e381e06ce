/*
 * config_tool.c - srl-config-check: the library's verdict on configuration
 * specs, one line per argument, for the cross-binding test
 * (tests/e2e/config_cross.sh) and by hand:
 *     ok CANONICAL-SPEC
 *     error OFFSET LENGTH MESSAGE
 * Exit status 0 (every verdict printed, good or bad), 2 on a bad call.
 */
#include <stdio.h>

#include "srl.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: srl-config-check SPEC...\n", stderr);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        srl_config cfg;
        srl_policy_error err;
        int rc = srl_config_parse(&cfg, argv[i], &err);
        if (rc != 0) {
            printf("error %u %u %s\n", err.offset, err.length, err.message);
            continue;
        }
        char text[SRL_CONFIG_TEXT_MAX];
        rc = srl_config_format(&cfg, text, sizeof text);
        srl_config_free(&cfg);
        if (rc < 0) {
            printf("format-failed %d\n", rc);
            continue;
        }
        printf("ok %s\n", text);
    }
    return 0;
}
