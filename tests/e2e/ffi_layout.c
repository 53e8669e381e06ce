/*
 * ffi_layout.c - the C compiler's view of the structs php/srl_ffi.h repeats.
 *
 * Prints, for each struct PHP's FFI binding declares, its size and every
 * field's offset, in srl.h's field order:
 *     srl_policy 16
 *     srl_policy.algorithm 0
 * ffi_layout.php prints the same from FFI's parse of srl_ffi.h, and
 * ffi_layout.sh requires the two outputs to be identical.  A field added to
 * srl.h but not to srl_ffi.h changes a size here, so it is caught too.
 * Then every code of SRL_ERRNO_MAP as php/Srl.php must spell it:
 *     SrlError::EINVAL -1
 */
#include <stddef.h>
#include <stdio.h>

#include "srl.h"

#define STRUCT(t) printf("%s %zu\n", #t, sizeof(t))
#define FIELD(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void)
{
    STRUCT(srl_policy);
    FIELD(srl_policy, algorithm);
    FIELD(srl_policy, permits);
    FIELD(srl_policy, window_ns);
    FIELD(srl_policy, burst);
    FIELD(srl_policy, penalty_max_s);
    FIELD(srl_policy, penalty_ns);

    STRUCT(srl_limits);
    FIELD(srl_limits, count);
    FIELD(srl_limits, reserved0);
    FIELD(srl_limits, limit);
    FIELD(srl_limits, reserved);

    STRUCT(srl_decision);
    FIELD(srl_decision, allowed);
    FIELD(srl_decision, limit);
    FIELD(srl_decision, remaining);
    FIELD(srl_decision, retry_after_ns);
    FIELD(srl_decision, reset_after_ns);
    FIELD(srl_decision, flags);
    FIELD(srl_decision, binding);
    FIELD(srl_decision, wait_ns);
    FIELD(srl_decision, reserved);

    STRUCT(srl_ticker);
    FIELD(srl_ticker, now);
    FIELD(srl_ticker, ctx);

    STRUCT(srl_config);
    FIELD(srl_config, policy);
    FIELD(srl_config, capacity);
    FIELD(srl_config, key_display);
    FIELD(srl_config, mode);
    FIELD(srl_config, on_full);
    FIELD(srl_config, lock_timeout_ms);
    FIELD(srl_config, ticker);
    FIELD(srl_config, owner_uid);
    FIELD(srl_config, limits);
    FIELD(srl_config, tiers);
    FIELD(srl_config, tier_count);
    FIELD(srl_config, flags);
    FIELD(srl_config, reserved);

    STRUCT(srl_tier);
    FIELD(srl_tier, name);
    FIELD(srl_tier, limits);

    STRUCT(srl_info);
    FIELD(srl_info, kind);
    FIELD(srl_info, policy);
    FIELD(srl_info, on_full);
    FIELD(srl_info, capacity);
    FIELD(srl_info, key_display);
    FIELD(srl_info, slots_per_bucket);
    FIELD(srl_info, buckets);
    FIELD(srl_info, segment_bytes);
    FIELD(srl_info, slot_bytes);
    FIELD(srl_info, mode);
    FIELD(srl_info, owner_uid);
    FIELD(srl_info, creator_pid);
    FIELD(srl_info, created_unix_ns);
    FIELD(srl_info, name);
    FIELD(srl_info, file_bytes);
    FIELD(srl_info, limits);
    FIELD(srl_info, state_bytes);
    FIELD(srl_info, layout_version);
    FIELD(srl_info, tier_count);
    FIELD(srl_info, policy_gen);
    FIELD(srl_info, flags);
    FIELD(srl_info, reserved32);
    FIELD(srl_info, reserved);

    STRUCT(srl_stats);
    FIELD(srl_stats, capacity);
    FIELD(srl_stats, used);
    FIELD(srl_stats, allowed);
    FIELD(srl_stats, denied);
    FIELD(srl_stats, full);
    FIELD(srl_stats, recovered);
    FIELD(srl_stats, reset_slots);
    FIELD(srl_stats, evicted);
    FIELD(srl_stats, timeouts);
    FIELD(srl_stats, reclaimed);
    FIELD(srl_stats, local_denied);
    FIELD(srl_stats, would_deny);
    FIELD(srl_stats, exempt);
    FIELD(srl_stats, evicted_active);

    STRUCT(srl_policy_error);
    FIELD(srl_policy_error, offset);
    FIELD(srl_policy_error, length);
    FIELD(srl_policy_error, message);
    FIELD(srl_policy_error, reserved);

    STRUCT(srl_cidr);
    FIELD(srl_cidr, family);
    FIELD(srl_cidr, prefix);
    FIELD(srl_cidr, addr);

    STRUCT(srl_lease);
    FIELD(srl_lease, owner);
    FIELD(srl_lease, where);
    FIELD(srl_lease, entry);
    FIELD(srl_lease, gen);
    FIELD(srl_lease, reserved);

    printf("srl_algorithm %zu\n", sizeof(srl_algorithm));
    printf("srl_on_full %zu\n", sizeof(srl_on_full));
    printf("srl_store_kind %zu\n", sizeof(srl_store_kind));

#define PHP_CONST(name, code, msg) printf("SrlError::%s %d\n", #name, code);
    SRL_ERRNO_MAP(PHP_CONST)
#undef PHP_CONST
    return 0;
}
