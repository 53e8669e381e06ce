/*
 * fuzz_input.h - the fuzz targets' one helper: the input as a C string.
 */
#ifndef SRL_FUZZ_INPUT_H
#define SRL_FUZZ_INPUT_H

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* A malloc'd NUL-terminated copy of data[0..size) (NULL if out of memory);
 * the caller frees it. */
static inline char *fuzz_cstring(const unsigned char *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s != NULL) {
        memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

#endif
