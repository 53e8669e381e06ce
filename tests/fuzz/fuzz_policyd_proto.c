/*
 * fuzz_policyd_proto.c - srl-policyd's protocol reader (policyd/proto.c) on
 * any bytes.  The first byte picks the read size (1..64 bytes a read, so
 * lines split at every boundary), the next two the bounds (line_max 1..256,
 * attributes 1..16); the rest is the peer's bytes, read request after
 * request until the reader stops.  Every request it accepts must keep its
 * bounds: at most attrs_max attributes, each name non-empty without '=',
 * name=value within line_max, valid UTF-8; every refusal's words are
 * printable (they go to the log).
 */
#include <assert.h>
#include <string.h>

#include "fuzz_input.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 3) return 0;
    pd_mem m = {(const char *)data + 3, size - 3, 0, (size_t)(data[0] % 64) + 1};
    uint32_t line_max = (uint32_t)data[1] + 1, attrs_max = (uint32_t)(data[2] % 16) + 1;
    pd_reader r;
    if (pd_reader_init(&r, pd_fill_mem, &m, line_max, attrs_max, 1000, 1000) != 0) return 0;
    for (;;) {
        char why[256];
        int st = pd_read_request(&r, why, sizeof why);
        for (const char *p = why; *p; p++) assert(*p >= 0x20 && *p < 0x7f);
        if (st != PD_OK) {
            assert(st != PD_EOF || why[0] == '\0');
            break;
        }
        assert(r.count >= 1 && r.count <= attrs_max);
        for (uint32_t i = 0; i < r.count; i++) {
            size_t n = strlen(r.attrs[i].name), v = strlen(r.attrs[i].value);
            assert(n >= 1 && strchr(r.attrs[i].name, '=') == NULL);
            assert(n + 1 + v <= line_max);
            assert(pd_utf8_valid(r.attrs[i].name, n, NULL) && pd_utf8_valid(r.attrs[i].value, v, NULL));
        }
    }
    pd_reader_free(&r);
    return 0;
}
