/*
 * fuzz_rlctl_args.c - libFuzzer target: rlctl's command-line parser
 * (tools/rlctl_args.c) on arbitrary argument vectors.
 *
 * The input is split at NUL bytes into at most 63 arguments after
 * argv[0] = "rlctl".  rlctl_parse must return 0 (then the options are
 * freed), EX_USAGE or RLCTL_HELP_SHOWN, and never crash or leak.  Every
 * argument that names a Redis uri is also redacted (rlctl_uri_redacted) as
 * typed, before the grammar could refuse it (any write past its buffer is
 * an ASan report): the redaction must hold for bytes no grammar checked.
 * Linked with every rlctl source (the command table lives in rlctl.c,
 * compiled with main renamed) and the library.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "rlctl.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *buf = fuzz_cstring(data, size);
    if (buf == NULL)
        return 0;
    char *argv[65];
    int argc = 0;
    argv[argc++] = (char *)"rlctl";
    for (size_t i = 0; i <= size && argc < 64;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    for (int i = 1; i < argc; i++) {
        if (!rlctl_is_uri(argv[i]))
            continue;
        free(rlctl_uri_redacted(argv[i]));   /* ASan judges its writes */
    }
    rlctl_opts o;
    int rc = rlctl_parse(argc, argv, &o);
    if (rc == 0)
        rlctl_opts_free(&o);
    else if (rc != EX_USAGE && rc != RLCTL_HELP_SHOWN)
        abort();
    free(buf);
    return 0;
}
