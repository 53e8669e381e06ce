/*
 * fuzz_policyd_conf.c - srl-policyd's config parser (policyd/conf.c) on any
 * text.  A refusal says "f.conf:LINE: ..." in printable words; an accepted
 * config has 1..PD_QUOTAS_MAX quotas, each with a key, a segment name srl
 * accepts and a policy srl_config_format can print, and every action it
 * would send is printable ASCII.  Nothing is opened (no segments).
 */
#include <assert.h>
#include <string.h>

#include "conf.h"
#include "fuzz_input.h"

static void printable(const char *s)
{
    for (; *s; s++) assert(*s >= 0x20 && *s < 0x7f);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    pd_conf c;
    char err[1024];
    if (pd_conf_parse(&c, "f.conf", (const char *)data, size, err, sizeof err) != 0) {
        assert(strncmp(err, "f.conf:", 7) == 0);
        return 0;
    }
    assert(c.quota_count >= 1 && c.quota_count <= PD_QUOTAS_MAX);
    for (uint32_t i = 0; i < c.quota_count; i++) {
        char spec[SRL_CONFIG_TEXT_MAX];
        assert(c.quota[i].key_count >= 1);
        assert(srl_name_check(c.quota[i].segment) == 0);
        assert(srl_config_format(&c.quota[i].cfg, spec, sizeof spec) > 0);
    }
    printable(c.default_action);
    printable(c.missing_action);
    printable(c.error_action);
    printable(c.defer_action);
    pd_conf_free(&c);
    return 0;
}
