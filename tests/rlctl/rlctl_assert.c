/* rlctl_assert.c - see rlctl_assert.h. */
#include "rlctl_assert.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

json_value *parse_out(const run_result *r)
{
    char err[128];
    ck_assert_msg(printable_ascii(r->out, r->out_len), "non-ASCII or control byte in: %s", r->out);
    ck_assert_msg(r->out_len > 0 && r->out[r->out_len - 1] == '\n' &&
                      memchr(r->out, '\n', r->out_len) == r->out + r->out_len - 1,
                  "not one line: %s", r->out);
    json_value *v = json_parse(r->out, r->out_len, err, sizeof err);
    ck_assert_msg(v != NULL, "bad JSON (%s): %s", err, r->out);
    return v;
}

void seg_create(const char *name, const char *policy, const char *capacity,
                   const char *display)
{
    run_result r;
    RUN(&r, 0, "create", name, "--policy", policy, "--capacity", capacity, "--key-display",
        display);
    run_free(&r);
}

void seg_destroy(const char *name)
{
    run_result r;
    RUN(&r, 0, "destroy", name);
    run_free(&r);
}

int shm_exists(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", name + 1);
    return access(path, F_OK) == 0;
}

/* The entry of `list --json` whose decoded "key" is key, or NULL. */
const json_value *find_key(const json_value *list, const char *key)
{
    const json_value *keys = json_get(list, "keys");
    ck_assert(keys != NULL && keys->type == JSON_ARRAY);
    const json_value *found = NULL;
    for (size_t i = 0; i < keys->n; i++) {
        const char *k = json_get_str(keys->items[i], "key");
        if (k != NULL && strcmp(k, key) == 0) {
            ck_assert_msg(found == NULL, "key %s listed twice", key);
            found = keys->items[i];
        }
    }
    return found;
}

int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
