/*
 * fuzz_config.c - libFuzzer target: srl_config_parse on arbitrary text,
 * and the format round trip on whatever it accepts.
 *
 * Invariants checked (abort on violation, which libFuzzer reports):
 *   - parse returns 0, SRL_EPOLICY or SRL_ENOMEM; a refusal names a span
 *     inside the text and a NUL-terminated message without control bytes;
 *   - an accepted config formats within SRL_CONFIG_TEXT_MAX, that text
 *     parses to the same config (field for field, tiers by content, the
 *     uri), and formats to the same text again (format is a fixed point);
 *   - nothing leaks (srl_config_free; LeakSanitizer).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "srl.h"

static void same(const srl_config *a, const srl_config *b)
{
    srl_config x = *a, y = *b;
    x.tiers = y.tiers = NULL;
    if (memcmp(&x, &y, sizeof x) != 0 || a->tier_count != b->tier_count)
        abort();
    if (a->tier_count > 0 && memcmp(a->tiers, b->tiers, a->tier_count * sizeof *a->tiers) != 0)
        abort();
    const char *ua = srl_config_redis(a), *ub = srl_config_redis(b);
    if ((ua == NULL) != (ub == NULL) || (ua != NULL && strcmp(ua, ub) != 0))
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    if (text == NULL)
        return 0;
    srl_config c;
    srl_policy_error e;
    int rc = srl_config_parse(&c, text, &e);
    size_t n = strlen(text);
    free(text);
    if (rc != 0) {
        if (rc != SRL_EPOLICY && rc != SRL_ENOMEM)
            abort();
        if (memchr(e.message, '\0', sizeof e.message) == NULL || e.offset > n ||
            e.length > n - e.offset)
            abort();
        for (const char *m = e.message; *m; m++)
            if ((unsigned char)*m < 0x20 || (unsigned char)*m == 0x7f)
                abort();
        return 0;
    }
    static char a[SRL_CONFIG_TEXT_MAX], b[SRL_CONFIG_TEXT_MAX];
    if (srl_config_format(&c, a, sizeof a) < 0)
        abort();
    srl_config d;
    if (srl_config_parse(&d, a, &e) != 0)
        abort();
    same(&c, &d);
    if (srl_config_format(&d, b, sizeof b) < 0 || strcmp(a, b) != 0)
        abort();
    srl_config_free(&c);
    srl_config_free(&d);
    return 0;
}
