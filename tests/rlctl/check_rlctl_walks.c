/*
 * check_rlctl_walks.c - suite "rlctl_walks": the commands that walk every
 * bucket of a segment, and what an operator sees of them (issue 16):
 *   - ls reads the headers only (STATUS from the header and the file, a
 *     last line saying the keys were not counted); ls --keys walks: USED,
 *     LOAD and the counter warnings;
 *   - list refuses more than 100000 keys without --top or --all-keys,
 *     exit 64, naming the count and both options;
 *   - the progress line of info, ls --keys, list, evict and check: on a
 *     terminal (a pseudo-terminal from openpty as stderr) "\r<text>\033[K"
 *     lines ending in the erase "\r\033[K"; nothing on a file, nothing with
 *     --json, nothing before RLCTL_PROGRESS_DELAY;
 *   - list's RESET_AFTER_NEXT beside AT_REST: a key at rest is answered
 *     as a new key, so the column shows one emission interval;
 *   - the key-display hint states the cost measured for the segment.
 *
 * The progress lines are drawn by a thread every 0.2 s, so how many come
 * between the first and the erase depends on the machine: RLCTL_PROGRESS_
 * DELAY=0 makes the first one drawn before the walk starts (exact text,
 * elapsed 0.0s), and every other line must match the same format
 * (regex), with counts that never go down.
 *
 * The big segment holds 100001 keys (just above the threshold), made
 * through the library in-process (a fork of rlctl per key would take a
 * minute); a 5/1h policy keeps every key away from rest during the test.
 */
#include <check.h>
#include <errno.h>
#include <pty.h>
#include <pwd.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <termios.h>
#include <unistd.h>

#include "rlctl_assert.h"
#include "srl.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

/* Run $RLCTL with stderr on a fresh pseudo-terminal of cols columns (raw
 * mode: bytes arrive as written) and stdout to a file; delay is
 * RLCTL_PROGRESS_DELAY (NULL: unset).  r->err holds what reached the
 * terminal. */
static int run_tty_fd(run_result *r, const char *delay, unsigned short cols,
                      const char *const *args, int tty_fd);

static int run_tty(run_result *r, const char *delay, unsigned short cols,
                   const char *const *args)
{
    return run_tty_fd(r, delay, cols, args, 2);
}

/* The same with the terminal on tty_fd (1: stdout, then r->out holds what
 * reached the terminal and r->err what went to stderr's file). */
static int run_tty_fd(run_result *r, const char *delay, unsigned short cols,
                      const char *const *args, int tty_fd)
{
    int m, s;
    struct winsize ws = {.ws_row = 24, .ws_col = cols};
    ck_assert(openpty(&m, &s, NULL, NULL, &ws) == 0);
    struct termios t;
    ck_assert(tcgetattr(s, &t) == 0);
    cfmakeraw(&t);
    ck_assert(tcsetattr(s, TCSANOW, &t) == 0);
    FILE *out = tmpfile();
    ck_assert(out != NULL);
    const char *bin = getenv("RLCTL");
    ck_assert_msg(bin != NULL, "RLCTL is not set: run the tests through meson");
    const char *argv[32] = {bin};
    size_t n = 1;
    for (; args[n - 1] != NULL && n < 31; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = test_fork();
    if (pid == 0) {
        close(m);
        setsid();
        dup2(fileno(out), 3 - tty_fd);
        dup2(s, tty_fd);
        close(s);
        if (delay != NULL)
            setenv("RLCTL_PROGRESS_DELAY", delay, 1);
        else
            unsetenv("RLCTL_PROGRESS_DELAY");
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(s);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ck_assert(buf != NULL);
    for (;;) {
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert(buf != NULL);
        }
        ssize_t got = read(m, buf + len, cap - len - 1);
        if (got > 0)
            len += (size_t)got;
        else if (got < 0 && errno == EINTR)
            continue;
        else
            break; /* EIO: every slave descriptor is closed (rlctl exited) */
    }
    close(m);
    buf[len] = '\0';
    int wst;
    ck_assert(waitpid(pid, &wst, 0) == pid);
    r->status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    r->err = buf;
    r->err_len = len;
    fflush(out);
    long on = ftell(out);
    rewind(out);
    r->out = malloc((size_t)(on > 0 ? on : 0) + 1);
    ck_assert(r->out != NULL);
    r->out_len = on > 0 ? fread(r->out, 1, (size_t)on, out) : 0;
    r->out[r->out_len] = '\0';
    fclose(out);
    if (tty_fd == 1) {
        char *t = r->out;
        size_t tl = r->out_len;
        r->out = r->err;
        r->out_len = r->err_len;
        r->err = t;
        r->err_len = tl;
    }
    return r->status;
}

#define TTY(r, want, delay, ...)                                                         \
    do {                                                                                 \
        const char *a_[] = {__VA_ARGS__, NULL};                                          \
        int st_ = run_tty((r), (delay), 200, a_);                                        \
        ck_assert_msg(st_ == (want), "rlctl %s (tty): exit %d (want %d)\nstderr: %s",    \
                      #__VA_ARGS__, st_, (want), (r)->err);                              \
    } while (0)

/* One phase of progress lines in *p: "\r" FIRST "\033[K" (exact), then any
 * number of "\r" LINE "\033[K" where LINE matches the extended regex more
 * (anchored), then the erase "\r\033[K".  The first number group of more,
 * if any, must never decrease.  Advances *p past the phase. */
static void expect_phase(const char **p, const char *first, const char *more)
{
    char want[512];
    snprintf(want, sizeof want, "\r%s\033[K", first);
    ck_assert_msg(strncmp(*p, want, strlen(want)) == 0, "want first line %s\ngot: %s",
                  first, *p);
    *p += strlen(want);
    regex_t re;
    char pat[600];
    snprintf(pat, sizeof pat, "^\r%s\033\\[K", more);
    ck_assert(regcomp(&re, pat, REG_EXTENDED) == 0);
    unsigned long long last = 0;
    for (;;) {
        if (strncmp(*p, "\r\033[K", 4) == 0) {
            *p += 4;
            break;
        }
        regmatch_t mt[2];
        ck_assert_msg(regexec(&re, *p, 2, mt, 0) == 0, "not a progress line of %s: %s", more,
                      *p);
        if (mt[1].rm_so >= 0) {
            unsigned long long v = strtoull(*p + mt[1].rm_so, NULL, 10);
            ck_assert_msg(v >= last, "progress went back: %llu after %llu", v, last);
            last = v;
        }
        *p += mt[0].rm_eo;
    }
    regfree(&re);
}

/* Make keys k000000.. in name until it tracks want keys (in-process,
 * through the library: the same API the workers use). */
static void fill(const char *name, uint64_t want)
{
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), 0);
    uint64_t tracked = 0;
    for (unsigned i = 0; tracked < want; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "k%06u", i);
        srl_decision d;
        ck_assert_int_eq(srl_acquire(lim, k, (size_t)n, 1, &d), 0);
        ck_assert(d.allowed);
        tracked += (d.flags & SRL_DECISION_UNTRACKED) == 0;
    }
    srl_stats st;
    ck_assert_int_eq(srl_stats_get(lim, &st), 0);
    ck_assert_uint_eq(st.used, want);
    srl_close(lim);
}

/* The words of the ls row of name (text output), at most 12, into w. */
static size_t ls_row(const char *out, const char *name, char w[12][64])
{
    char row[300];
    snprintf(row, sizeof row, "\n%s ", name);
    const char *line = strstr(out, row);
    ck_assert_msg(line != NULL, "no row for %s: %s", name, out);
    line++;
    const char *end = strchr(line, '\n');
    size_t n = 0;
    while (line < end && n < 12) {
        while (*line == ' ')
            line++;
        size_t k = strcspn(line, " \n");
        if (k == 0)
            break;
        snprintf(w[n++], 64, "%.*s", (int)k, line);
        line += k;
    }
    return n;
}

/* The ls row of want[0] has exactly n words, each equal to want[i] (NULL:
 * any). */
static void assert_ls_row(const char *out, const char *const *want, size_t n)
{
    char w[12][64];
    ck_assert_uint_eq(ls_row(out, want[0], w), n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(want[i] == NULL || strcmp(w[i], want[i]) == 0,
                      "ls row of %s: word %zu is '%s', want '%s'", want[0], i, w[i], want[i]);
}

static size_t count_lines(const run_result *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->out_len; i++)
        n += r->out[i] == '\n';
    return n;
}

/* A top-level number of `list NAME --json` (exit 0). */
static uint64_t list_json_u64(const char *name, const char *field)
{
    run_result r;
    RUN(&r, 0, "list", name, "--json");
    json_value *v = parse_out(&r);
    uint64_t n = json_get_u64(v, field);
    json_free(v);
    run_free(&r);
    return n;
}

/* The ls --json entry of name, or fail. */
static const json_value *ls_entry(const json_value *v, const char *name)
{
    const json_value *segs = json_get(v, "segments");
    ck_assert(segs != NULL && segs->type == JSON_ARRAY);
    for (size_t i = 0; i < segs->n; i++)
        if (strcmp(json_get_str(segs->items[i], "name"), name) == 0)
            return segs->items[i];
    ck_abort_msg("%s not in ls --json", name);
    return NULL;
}

static const char *me(void)
{
    struct passwd *pw = getpwuid(geteuid());
    ck_assert(pw != NULL);
    return pw->pw_name;
}

/* ---------------------------------------------------------------- ls */

START_TEST(ls_reads_the_headers_only_and_counts_keys_only_with_keys)
{
    char name[160];
    seg_name(name, sizeof name, "ls");
    seg_create(name, "gcra:10/1h", "16", "0");
    fill(name, 15); /* 15 of 16: load 93.75 %, a warning only a walk can see */
    run_result r;
    RUN(&r, 0, "ls");
    /* NAME STATUS POLICY CAPACITY SIZE("N.N KiB": two words) OWNER */
    const char *const plain[] = {name, "ok", "gcra:10/1h", "16", NULL, "KiB", me()};
    assert_ls_row(r.out, plain, 7);
    char head[256];
    snprintf(head, sizeof head, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    size_t hl = strlen(head);
    ck_assert_msg(strncmp(head, "NAME ", 5) == 0 && hl > 6 && strcmp(head + hl - 6, " OWNER") == 0 &&
                      strstr(head, " USED ") == NULL && strstr(head, " LOAD ") == NULL,
                  "header: %s", r.out);
    /* Not a terminal (a script reads it): no footer. */
    ck_assert_msg(strstr(r.out, "keys not counted") == NULL, "footer in a pipe: %s", r.out);
    run_free(&r);
    /* On a terminal: one short line after the table. */
    {
        const char *a[] = {"ls", NULL};
        ck_assert_int_eq(run_tty_fd(&r, "0", 200, a, 1), 0);
        const char *foot = "\n(keys not counted: 'rlctl ls --keys' adds USED, LOAD and their "
                           "warnings)\n";
        const char *at = strstr(r.out, foot);
        ck_assert_msg(at != NULL, "no footer on a terminal: %s", r.out);
        ck_assert_msg(strstr(at + strlen(foot), "keys not counted") == NULL, "twice: %s", r.out);
        ck_assert_msg(strstr(r.out, name) != NULL, "%s", r.out);
        run_free(&r);
    }

    RUN(&r, 0, "ls", "--keys");
    /* NAME STATUS POLICY CAPACITY USED LOAD SIZE(2) OWNER */
    const char *const counted[] = {name, "load", "gcra:10/1h", "16", "15", "93.75%", NULL, "KiB",
                                   me()};
    assert_ls_row(r.out, counted, 9);
    ck_assert_msg(strstr(r.out, "keys not counted") == NULL, "%s", r.out);
    run_free(&r);

    RUN(&r, 0, "ls", "--json");
    json_value *v = parse_out(&r);
    ck_assert_uint_eq(json_get_u64(v, "schema_version"), 3);
    ck_assert_int_eq(json_get_bool(v, "counted"), 0);
    const json_value *e = ls_entry(v, name);
    ck_assert_str_eq(json_get_str(e, "status"), "ok");
    ck_assert(json_get(e, "used")->type == JSON_NULL);
    ck_assert(json_get(e, "load_factor")->type == JSON_NULL);
    ck_assert_uint_eq(json_get_u64(e, "capacity"), 16);
    ck_assert_uint_eq(json_get_u64(e, "owner_uid"), geteuid());
    ck_assert_str_eq(json_get_str(e, "owner"), me());
    json_free(v);
    run_free(&r);

    RUN(&r, 0, "ls", "--keys", "--json");
    v = parse_out(&r);
    ck_assert_int_eq(json_get_bool(v, "counted"), 1);
    e = ls_entry(v, name);
    ck_assert_str_eq(json_get_str(e, "status"), "load");
    ck_assert_uint_eq(json_get_u64(e, "used"), 15);
    ck_assert_str_eq(json_get(e, "load_factor")->text, "0.937500");
    json_free(v);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* -------------------------------------------------------------- list */

START_TEST(list_refuses_more_than_100000_keys_without_top_or_all_keys)
{
    char name[160], want[600];
    seg_name(name, sizeof name, "many");
    seg_create(name, "token_bucket:5/1h", "262144", "0");
    fill(name, 100001);
    run_result r;
    RUN(&r, EX_USAGE, "list", name);
    snprintf(want, sizeof want,
             "rlctl: list: %s tracks 100001 keys, more than 100000: give --top N (with --sort "
             "denied, allowed or recent) for the N that matter, or --all-keys to list every "
             "one\n",
             name);
    ck_assert_str_eq(r.err, want);
    ck_assert_str_eq(r.out, "");
    run_free(&r);

    RUN(&r, EX_USAGE, "list", name, "--json");
    ck_assert_str_eq(r.err, want);
    json_value *v = parse_out(&r);
    ck_assert_str_eq(json_get_str(v, "name"), name);
    ck_assert_str_eq(json_get_str(v, "error"), "too many keys to list without --top or --all-keys");
    ck_assert_uint_eq(json_get_u64(v, "used"), 100001);
    ck_assert_uint_eq(json_get_u64(v, "max_keys"), 100000);
    ck_assert_uint_eq(json_get_u64(v, "exit_status"), EX_USAGE);
    json_free(v);
    run_free(&r);

    RUN(&r, EX_USAGE, "list", name, "--top", "2", "--all-keys");
    ck_assert_msg(strncmp(r.err, "rlctl: list: give --top N or --all-keys, not both\n", 50) == 0,
                  "%s", r.err);
    run_free(&r);

    RUN(&r, 0, "list", name, "--top", "2");
    ck_assert_msg(strstr(r.out, "\n(2 of 100001 keys shown)\n") != NULL, "%s", r.out);
    run_free(&r);
    RUN(&r, 0, "list", name, "--sort", "allowed", "--top", "3");
    ck_assert_msg(strstr(r.out, "\n(3 of 100001 keys shown)\n") != NULL, "%s", r.out);
    run_free(&r);

    RUN(&r, 0, "list", name, "--all-keys");
    ck_assert_uint_eq(count_lines(&r), 1 + 100001 + 1); /* header, keys, fingerprint hint */
    ck_assert_str_eq(r.err, "");
    run_free(&r);

    /* Exactly the threshold is listed. */
    srl_limiter *lim;
    ck_assert_int_eq(srl_open_shared(name, NULL, 0, &lim), 0);
    ck_assert_int_eq(srl_reset_key(lim, "k000000", 7), 0);
    srl_close(lim);
    /* In text: parsing 100000 keys of JSON takes the strict test parser
     * most of a minute under AddressSanitizer. */
    RUN(&r, 0, "list", name);
    ck_assert_uint_eq(count_lines(&r), 1 + 100000 + 1);
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* A key at rest is indistinguishable from a new one: a request now would
 * be answered as a new key's first, whose reset is one emission interval.
 * The column says it is that answer (RESET_AFTER_NEXT), not the key's
 * state (AT_REST). */
START_TEST(list_shows_reset_after_next_beside_at_rest)
{
    char name[160];
    seg_name(name, sizeof name, "rest");
    /* 1000/1s: one permit a millisecond, so a key is back at rest 1 ms
     * after its request; the precise clock (T far below 100 ticks). */
    seg_create(name, "token_bucket:1000/1s", "64", "8");
    run_result r;
    RUN(&r, 0, "try", name, "a");
    run_free(&r);
    /* Poll (bounded) until the key is seen at rest; not a guessed sleep. */
    uint64_t t0 = srl_monotonic_ns(NULL);
    for (;;) {
        RUN(&r, 0, "list", name, "--json");
        json_value *v = parse_out(&r);
        const json_value *e = find_key(v, "a");
        ck_assert(e != NULL);
        int rest = json_get_bool(e, "at_rest");
        if (rest) {
            ck_assert_uint_eq(json_get_u64(e, "available"), 1000);
            ck_assert_uint_eq(json_get_u64(e, "retry_after_ns"), 0);
            ck_assert_uint_eq(json_get_u64(e, "reset_after_ns"), 1000000);
        }
        json_free(v);
        run_free(&r);
        if (rest)
            break;
        ck_assert_msg(srl_monotonic_ns(NULL) - t0 < 30ull * 1000000000ull,
                      "a not at rest after 30 s");
        usleep(1000);
    }
    RUN(&r, 0, "list", name);
    ck_assert_msg(strncmp(r.out, "KEY  LEN  ALLOWED  DENIED  AVAILABLE  RETRY_AFTER  "
                                 "RESET_AFTER_NEXT  ", 69) == 0, "header: %s", r.out);
    char w[12][64];
    const char *row = strstr(r.out, "\na ");
    ck_assert_msg(row != NULL, "%s", r.out);
    ck_assert_int_eq(sscanf(row + 1, "%63s %63s %63s %63s %63s %63s %63s %63s %63s", w[0], w[1],
                            w[2], w[3], w[4], w[5], w[6], w[7], w[8]), 9);
    ck_assert_str_eq(w[1], "1");          /* LEN */
    ck_assert_str_eq(w[2], "1");          /* ALLOWED */
    ck_assert_str_eq(w[3], "0");          /* DENIED */
    ck_assert_str_eq(w[4], "1000/1000");  /* AVAILABLE */
    ck_assert_str_eq(w[5], "0s");         /* RETRY_AFTER: a duration, with its unit */
    ck_assert_str_eq(w[6], "1.000ms");    /* RESET_AFTER_NEXT: a new key's first request */
    ck_assert_str_eq(w[8], "yes");        /* AT_REST */
    run_free(&r);
    seg_destroy(name);
}
END_TEST

/* The hint under a fingerprint listing states what --key-display 32
 * costs this segment: measured by creating one (the slot grows by the
 * display bytes and the stored key length, not by 32 alone). */
START_TEST(the_fingerprint_hint_states_the_measured_cost_of_key_display_32)
{
    char name[160], big[160], want[600];
    seg_name(name, sizeof name, "hint");
    seg_name(big, sizeof big, "hint32");
    run_result r;
    RUN(&r, 0, "create", name, "--policy", "token_bucket:5/1h", "--capacity", "64", "--json");
    json_value *v = parse_out(&r);
    uint64_t slot0 = json_get_u64(v, "slot_bytes"), cap = json_get_u64(v, "capacity");
    json_free(v);
    run_free(&r);
    RUN(&r, 0, "create", big, "--policy", "token_bucket:5/1h", "--capacity", "64",
        "--key-display", "32", "--json");
    v = parse_out(&r);
    uint64_t slot32 = json_get_u64(v, "slot_bytes");
    json_free(v);
    run_free(&r);
    ck_assert_uint_gt(slot32, slot0 + 32); /* more than the 32 display bytes */
    RUN(&r, 0, "try", name, "k");
    run_free(&r);
    RUN(&r, 0, "list", name);
    uint64_t per = slot32 - slot0, total = per * cap;
    char size[48];
    if (total < 1024)
        snprintf(size, sizeof size, "%llu B", (unsigned long long)total);
    else
        snprintf(size, sizeof size, "%llu.%llu KiB", (unsigned long long)(total / 1024),
                 (unsigned long long)(total * 10 / 1024 % 10));
    snprintf(want, sizeof want,
             "\n(keys shown by fingerprint: this segment keeps no key bytes; to see them, "
             "recreate it with --key-display 32 and open it with key_display 32 in the workers: "
             "%llu more bytes per slot, %s for its %llu slots)\n",
             (unsigned long long)per, size, (unsigned long long)cap);
    ck_assert_msg(strstr(r.out, want) != NULL, "want %s\nin: %s", want + 1, r.out);
    run_free(&r);
    ck_assert_uint_eq(list_json_u64(name, "key_display"), 0);
    seg_destroy(name);
    seg_destroy(big);
}
END_TEST

/* ---------------------------------------------------------- progress */

START_TEST(long_walks_show_progress_on_a_tty_only)
{
    char name[160], first[400], more[400];
    seg_name(name, sizeof name, "tty");
    seg_create(name, "token_bucket:5/1h", "64", "8"); /* 4 buckets */
    fill(name, 3);
    run_result r;
    /* Each command: its arguments (NAME stands for the segment) and the
     * phases of its progress, each the exact first line and the regex of
     * the lines that may follow (%s: the segment). */
#define NUM "[0-9]+\\.[0-9]s"
    static const struct {
        const char *args[4];
        const char *phase[3][2];
    } cases[] = {
        {{"info", "NAME"},
         {{"rlctl: info: counting %s: 4 buckets, 0.0s",
           "rlctl: info: counting %s: 4 buckets, " NUM}}},
        /* list: the count, the keys against it, then (stdout is a file,
         * not the terminal) the rows written */
        {{"list", "NAME"},
         {{"rlctl: list: counting %s: 4 buckets, 0.0s",
           "rlctl: list: counting %s: 4 buckets, " NUM},
          {"rlctl: list: %s: 0 of 3 keys (0 %%), 0.0s",
           "rlctl: list: %s: ([0-9]+) of 3 keys \\([0-9]+ %%\\), " NUM},
          {"rlctl: list: %s: writing: 0 of 3 rows (0 %%), 0.0s",
           "rlctl: list: %s: writing: ([0-9]+) of 3 rows \\([0-9]+ %%\\), " NUM}}},
        /* list --top: the bounded walk (total unknown), then the count */
        {{"list", "NAME", "--top", "1"},
         {{"rlctl: list: %s: 0 keys, 0.0s", "rlctl: list: %s: ([0-9]+) keys, " NUM},
          {"rlctl: list: counting %s: 4 buckets, 0.0s",
           "rlctl: list: counting %s: 4 buckets, " NUM},
          {"rlctl: list: %s: writing: 0 of 1 row (0 %%), 0.0s",
           "rlctl: list: %s: writing: ([0-9]+) of 1 row \\([0-9]+ %%\\), " NUM}}},
        {{"evict", "NAME", "--dry-run"},
         {{"rlctl: evict --dry-run: %s: 0 keys checked, 0.0s",
           "rlctl: evict --dry-run: %s: ([0-9]+) keys checked, " NUM}}},
        {{"evict", "NAME"},
         {{"rlctl: evict: %s: 4 buckets, 0.0s", "rlctl: evict: %s: 4 buckets, " NUM}}},
        {{"check", "NAME"},
         {{"rlctl: check: %s: 4 buckets, 0.0s", "rlctl: check: %s: 4 buckets, " NUM}}},
    };
#undef NUM
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[5] = {NULL};
        for (size_t k = 0; k < 4 && cases[i].args[k] != NULL; k++)
            args[k] = strcmp(cases[i].args[k], "NAME") == 0 ? name : cases[i].args[k];
        ck_assert_msg(run_tty(&r, "0", 200, args) == 0, "%s: %s", args[0], r.err);
        const char *p = r.err;
        for (size_t k = 0; k < 3 && cases[i].phase[k][0] != NULL; k++) {
            snprintf(first, sizeof first, cases[i].phase[k][0], name);
            snprintf(more, sizeof more, cases[i].phase[k][1], name);
            expect_phase(&p, first, more);
        }
        ck_assert_msg(*p == '\0', "%s: after the progress: %s", args[0], p);
        if (i == 0) /* the output itself is untouched */
            ck_assert_msg(strstr(r.out, "\nused:           3 keys\n") != NULL, "%s", r.out);
        run_free(&r);
    }

    /* ls --keys: one phase per segment of the host (others may exist);
     * ours is among them, and the last thing written is an erase. */
    TTY(&r, 0, "0", "ls", "--keys");
    snprintf(first, sizeof first, "\rrlctl: ls: counting %s: 4 buckets, 0.0s\033[K", name);
    ck_assert_msg(strstr(r.err, first) != NULL, "no line for %s in: %s", name, r.err);
    ck_assert(r.err_len >= 4 && strcmp(r.err + r.err_len - 4, "\r\033[K") == 0);
    run_free(&r);
    /* ls without --keys walks nothing: no line at all. */
    TTY(&r, 0, "0", "ls");
    ck_assert_str_eq(r.err, "");
    run_free(&r);

    /* A narrow terminal: the line is cut to its width less one. */
    {
        const char *a[] = {"info", name, NULL};
        ck_assert_int_eq(run_tty(&r, "0", 30, a), 0);
        snprintf(first, sizeof first, "rlctl: info: counting %s", name);
        snprintf(more, sizeof more, "\r%.29s\033[K", first);
        ck_assert_msg(strncmp(r.err, more, strlen(more)) == 0, "got: %s", r.err);
        run_free(&r);
    }

    /* Never with --json, never before the delay, never on a file. */
    TTY(&r, 0, "0", "info", name, "--json");
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    TTY(&r, 0, "0", "list", name, "--json");
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    TTY(&r, 0, "86400", "list", name);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    ck_assert_int_eq(setenv("RLCTL_PROGRESS_DELAY", "0", 1), 0);
    RUN(&r, 0, "list", name);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    RUN(&r, 0, "info", name);
    ck_assert_str_eq(r.err, "");
    run_free(&r);
    seg_destroy(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlctl_walks");
    TCase *tc = tcase_create("walks");
    tcase_add_unchecked_fixture(tc, seg_prefix_init, seg_prefix_cleanup);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ls_reads_the_headers_only_and_counts_keys_only_with_keys);
    tcase_add_test(tc, list_refuses_more_than_100000_keys_without_top_or_all_keys);
    tcase_add_test(tc, list_shows_reset_after_next_beside_at_rest);
    tcase_add_test(tc, the_fingerprint_hint_states_the_measured_cost_of_key_display_32);
    tcase_add_test(tc, long_walks_show_progress_on_a_tty_only);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
