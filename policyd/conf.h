/*
 * conf.h - srl-policyd's configuration: the file's directives (conf.c holds
 * them as a table) and what they set.  srl's own options (the quota's
 * limit, capacity, on_full, ...) are srl_config_parse/srl_config_set's.
 */
#ifndef SRL_POLICYD_CONF_H
#define SRL_POLICYD_CONF_H

#include <srl.h>
#include <stddef.h>
#include <stdint.h>

#define PD_QUOTAS_MAX 16u
#define PD_KEY_ATTRS_MAX 4u
#define PD_EXEMPT_MAX 64u
#define PD_NAME_MAX 32u       /* a quota's name */
#define PD_ACTION_MAX 512u    /* an action's text */
#define PD_CONF_FILE_MAX (1u << 20)

enum pd_log_to { PD_LOG_SYSLOG = 0, PD_LOG_STDERR, PD_LOG_FILE };

typedef struct pd_exempt {
    char *attr;
    char *value;
} pd_exempt;

typedef struct pd_quota {
    char name[PD_NAME_MAX + 1];
    char *segment;                     /* srl segment name */
    srl_config cfg;                    /* from the quota line's spec */
    char *key_attrs[PD_KEY_ATTRS_MAX]; /* the key: these values, NUL-joined */
    uint32_t key_count;
    char *cost_attr;                   /* NULL: every request costs cost_fixed */
    uint32_t cost_fixed;
    pd_exempt exempt[PD_EXEMPT_MAX];
    uint32_t exempt_count;
    srl_limiter *lim;                  /* pd_conf_open */
} pd_quota;

typedef struct pd_conf {
    char *listen;             /* NULL: stdin/stdout (spawn(8)) */
    uint32_t socket_mode;
    enum pd_log_to log_to;
    char *log_file;
    uint32_t max_line, max_attributes, max_clients;
    uint32_t idle_timeout_s, request_timeout_s;
    char *default_action;     /* bad input */
    char *missing_action;     /* a quota's key attribute absent or empty */
    char *error_action;       /* srl failed */
    char *defer_action;       /* the word before "4.7.1 ..." on a denial */
    pd_quota quota[PD_QUOTAS_MAX];
    uint32_t quota_count;
} pd_conf;

/* Parse text (the file's bytes, len of them; NUL bytes are refused) into *c.
 * file names the text in messages.  Returns 0, or -1 with err holding
 * "FILE:LINE: what is wrong" (the first fault; *c then freed). */
int pd_conf_parse(pd_conf *c, const char *file, const char *text, size_t len, char *err,
                  size_t errlen);
/* Read path (at most PD_CONF_FILE_MAX bytes) and parse it. */
int pd_conf_load(pd_conf *c, const char *path, char *err, size_t errlen);
/* Open (create, or take the config's policy into) each quota's segment. */
int pd_conf_open(pd_conf *c, char *err, size_t errlen);
void pd_conf_free(pd_conf *c);

#endif
