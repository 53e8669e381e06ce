#define FFI_SCOPE "srl"
#define FFI_LIB "libsrl.so.0"
/*
 * srl_ffi.h - the part of include/srl.h that PHP's FFI uses.
 *
 * FFI parses C declarations but not the preprocessor: no #include, no
 * macros other than FFI_SCOPE and FFI_LIB, no attributes.  So this file
 * repeats, by hand, the types and functions of srl.h the PHP binding needs,
 * with the same layout.  tests/e2e/ffi_layout.sh compares every struct's
 * size and field offsets as PHP sees them here with the C compiler's view
 * of srl.h, so the two cannot drift apart unnoticed.
 *
 * The two #define lines must stay first: FFI::load reads its directives
 * only at the top of the file.  FFI_LIB is the library's soname; the
 * dynamic loader finds it the usual way (ld.so.cache, LD_LIBRARY_PATH).
 * Keys are passed as const char * with an explicit length (srl.h says
 * const void *: the same ABI, and PHP strings convert to char pointers),
 * so keys may hold any bytes.
 */

typedef enum srl_algorithm {
    SRL_TOKEN_BUCKET = 0,
    SRL_SLIDING_LOG = 1,
    SRL_SLIDING_COUNTER = 2,
    SRL_GCRA = 3,
    SRL_CONCURRENCY = 4,
    SRL_FIXED_WINDOW = 5
} srl_algorithm;

typedef struct srl_policy {
    srl_algorithm algorithm;
    uint32_t permits;
    uint64_t window_ns;
    uint32_t burst;
    uint32_t penalty_max_s;
    uint64_t penalty_ns;
} srl_policy;

typedef struct srl_limits {
    uint32_t count;
    uint32_t reserved0;
    srl_policy limit[4];
    uint64_t reserved[4];
} srl_limits;

typedef struct srl_decision {
    int allowed;
    uint32_t limit;
    uint32_t remaining;
    uint64_t retry_after_ns;
    uint64_t reset_after_ns;
    unsigned flags;
    uint32_t binding;
    uint64_t wait_ns;
    uint64_t reserved[2];
} srl_decision;

typedef uint64_t (*srl_ticker_fn)(void *ctx);

typedef struct srl_ticker {
    srl_ticker_fn now;
    void *ctx;
} srl_ticker;

typedef struct srl_limiter srl_limiter;

typedef enum srl_on_full {
    SRL_ON_FULL_ALLOW = 0,
    SRL_ON_FULL_DENY = 1,
    SRL_ON_FULL_EVICT = 2
} srl_on_full;

typedef struct srl_config {
    srl_policy policy;
    uint64_t capacity;
    uint32_t key_display;
    uint32_t mode;
    srl_on_full on_full;
    uint32_t lock_timeout_ms;
    srl_ticker ticker;
    uint32_t owner_uid;
    srl_limits limits;
    const struct srl_tier *tiers;
    uint32_t tier_count;
    uint32_t flags;
    uint64_t reserved[2];
} srl_config;

typedef struct srl_tier {
    char name[32];
    srl_limits limits;
} srl_tier;

typedef struct srl_stats {
    uint64_t capacity;
    uint64_t used;
    uint64_t allowed;
    uint64_t denied;
    uint64_t full;
    uint64_t recovered;
    uint64_t reset_slots;
    uint64_t evicted;
    uint64_t timeouts;
    uint64_t reclaimed;
    uint64_t local_denied;
    uint64_t would_deny;
    uint64_t exempt;
    uint64_t evicted_active;
} srl_stats;

typedef enum srl_store_kind {
    SRL_STORE_SHARED = 0, SRL_STORE_ANONYMOUS = 1, SRL_STORE_LOCAL = 2, SRL_STORE_REDIS = 3,
    SRL_STORE_FRONTED = 4, SRL_STORE_TIERED = 4
} srl_store_kind;

typedef struct srl_info {
    srl_store_kind kind;
    srl_policy policy;
    srl_on_full on_full;
    uint64_t capacity;
    uint32_t key_display;
    uint32_t slots_per_bucket;
    uint64_t buckets;
    uint64_t segment_bytes;
    uint32_t slot_bytes;
    uint32_t mode;
    uint32_t owner_uid;
    int32_t creator_pid;
    uint64_t created_unix_ns;
    char name[256];
    uint64_t file_bytes;
    srl_limits limits;
    uint32_t state_bytes;
    uint32_t layout_version;
    uint32_t tier_count;
    uint32_t policy_gen;
    uint32_t flags;
    uint32_t reserved32;
    uint64_t reserved[2];
} srl_info;

int srl_info_get(srl_limiter *lim, srl_info *out);
int srl_mismatch_explain(const srl_config *cfg, const srl_info *segment, char *buf, size_t len);
typedef enum srl_binding {
    SRL_BINDING_C = 0, SRL_BINDING_RLCTL = 1, SRL_BINDING_PYTHON = 2, SRL_BINDING_PHP = 3,
    SRL_BINDING_APACHE = 4, SRL_BINDING_COUNT = 5
} srl_binding;
int srl_mismatch_explain_for(const srl_config *cfg, const srl_info *segment, srl_binding b,
                             char *buf, size_t len);

const char *srl_strerror(int code);
size_t srl_last_error(char *buf, size_t len);
int srl_open_explain(const char *name, const srl_config *cfg, char *msg, size_t len);

typedef struct srl_policy_error {
    uint32_t offset;
    uint32_t length;
    char message[128];
    uint64_t reserved[4];
} srl_policy_error;

int srl_policy_parse(const char *text, srl_policy *out);
int srl_policy_parse_ex(const char *text, srl_policy *out, srl_policy_error *err);
int srl_policy_format(const srl_policy *p, char *buf, size_t len);
int srl_limits_parse_ex(const char *text, srl_limits *out, srl_policy_error *err);
int srl_limits_format(const srl_limits *l, char *buf, size_t len);

void srl_config_init(srl_config *cfg);
int srl_config_parse(srl_config *cfg, const char *spec, srl_policy_error *err);
int srl_config_set(srl_config *cfg, const char *name, const char *value,
                   srl_policy_error *err);
int srl_config_format(const srl_config *cfg, char *buf, size_t len);
const char *srl_config_redis(const srl_config *cfg);
void srl_config_free(srl_config *cfg);
int srl_open_shared(const char *name, const srl_config *cfg, unsigned flags,
                    srl_limiter **out);
int srl_open_redis(const char *uri, const srl_config *cfg, srl_limiter **out);
int srl_open_fronted(const char *shm_name, const char *uri, const srl_config *cfg,
                     unsigned flags, srl_limiter **out);
int srl_open_tiered(const char *shm_name, const char *uri, const srl_config *cfg,
                    unsigned flags, srl_limiter **out);
int srl_redis_uri_check(const char *uri, char *why, size_t whylen);
void srl_close(srl_limiter *lim);
int srl_unlink(const char *name);

int srl_acquire(srl_limiter *lim, const char *key, size_t len, uint32_t cost,
                srl_decision *d);
int srl_acquire_tier(srl_limiter *lim, uint32_t tier, const char *key, size_t len,
                     uint32_t cost, srl_decision *d);
int srl_tier_find(srl_limiter *lim, const char *name);
int srl_tier_get(srl_limiter *lim, uint32_t i, srl_tier *out);
int srl_peek(srl_limiter *lim, const char *key, size_t len, uint32_t cost,
             srl_decision *d);
int srl_reset_key(srl_limiter *lim, const char *key, size_t len);
int srl_refund(srl_limiter *lim, const char *key, size_t len, uint32_t cost);
const void *srl_key_fit(const char *key, size_t *len, unsigned char *buf);
int srl_reserve(srl_limiter *lim, const char *key, size_t len, uint32_t cost,
                uint64_t max_wait_ns, srl_decision *d);
int srl_stats_get(srl_limiter *lim, srl_stats *out);
int srl_key_exempt(srl_limiter *lim, const char *key, size_t len, int on);

typedef struct srl_cidr {
    uint8_t family;
    uint8_t prefix;
    uint8_t addr[16];
} srl_cidr;
int srl_key_ip(const char *addr, unsigned v4_prefix, unsigned v6_prefix, char *buf, size_t len);
int srl_cidr_parse(const char *text, srl_cidr *out);
int srl_cidr_match(const srl_cidr *c, const char *addr);
int srl_cidr_format(const srl_cidr *c, char *buf, size_t len);

typedef struct srl_lease {
    uint64_t owner;
    uint64_t where[2];
    uint32_t entry;
    uint32_t gen;
    uint64_t reserved;
} srl_lease;

int srl_enter(srl_limiter *lim, const char *key, size_t len, srl_lease *lease,
              srl_decision *d);
int srl_leave(srl_limiter *lim, srl_lease *lease);

int srl_format_retry_after(const srl_decision *d, char *buf, size_t len);
int srl_format_ratelimit_policy(const srl_policy *p, const char *name, char *buf,
                                size_t len);
int srl_format_ratelimit(const srl_decision *d, const char *name, char *buf,
                         size_t len);
int srl_format_ratelimit_policies(const srl_limits *l, const char *name, char *buf,
                                  size_t len);
int srl_format_ratelimit_binding(const srl_limits *l, const srl_decision *d,
                                 const char *name, char *buf, size_t len);
