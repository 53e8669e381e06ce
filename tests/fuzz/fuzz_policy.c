/*
 * fuzz_policy.c - libFuzzer target: srl_policy_parse on arbitrary text,
 * and the format round trip on whatever it accepts.
 *
 * Invariants checked (abort on violation, which libFuzzer reports):
 *   - parse returns 0 or SRL_EPOLICY, and on 0 the policy validates;
 *   - format of an accepted policy succeeds within SRL_POLICY_TEXT_MAX;
 *   - parsing that text gives the same policy, and formatting it again
 *     gives the same text (format is a fixed point).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "srl.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    if (text == NULL)
        return 0;
    srl_policy p;
    int rc = srl_policy_parse(text, &p);
    free(text);
    if (rc != 0) {
        if (rc != SRL_EPOLICY)
            abort();
        return 0;
    }
    if (srl_policy_validate(&p) != 0)
        abort();
    char a[SRL_POLICY_TEXT_MAX], b[SRL_POLICY_TEXT_MAX];
    if (srl_policy_format(&p, a, sizeof a) < 0)
        abort();
    srl_policy q;
    if (srl_policy_parse(a, &q) != 0)
        abort();
    if (q.algorithm != p.algorithm || q.permits != p.permits || q.window_ns != p.window_ns)
        abort();
    if (srl_policy_format(&q, b, sizeof b) < 0 || strcmp(a, b) != 0)
        abort();
    return 0;
}
