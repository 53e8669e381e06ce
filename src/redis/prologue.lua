-- prologue.lua - the start of every decision script of the Redis store
-- (src/redis/redis_store.c), joined after num.lua and before the algorithms
-- (gcra.lua, token_bucket.lua, sliding_log.lua, sliding_counter.lua: one for
-- a single limit, then one.lua; all four for a compound, then
-- compound.lua) at build time (embed.py).
--
-- KEYS: the key's state P:k:<key>, P:cfg (on a cluster the slot hash
-- P:s:{tag}), P:stats (on a cluster the slot hash again).
-- ARGV: mode ('a' acquire, 'p' peek, 'r' refund cost), cost, permits,
-- window_ns, injected now ('' = the server's TIME; non-empty only for a
-- limiter opened with a ticker in test mode), capacity (burst= of the token
-- bucket and GCRA, else permits), max_wait ('0'; an acquire with more is
-- srl_reserve's, token bucket and GCRA only), dry ('1': a dry-run handle's
-- call, its denials counted in P:stats would_deny too); a compound's limits
-- follow (compound.lua).
-- Each script returns {-1} (peek or refund of a key with no state), {-2}
-- (refunded) or {allowed, remaining, retry_after, reset_after}, as the
-- algorithm of the same name in src/algo_*.c (a compound adds the binding
-- limit; a reservation adds its wait last, '0' if refused or not needed).
-- A state that comes to rest is deleted (or expires then): a missing key is
-- a fresh one.
--
-- Each algorithm file adds algo[letter] = function(v, P, W, CAP) on one
-- limit's state text v (nil: fresh), returning the reply and, if the state
-- changes when the decision commits, the new text and its time to rest (a
-- num; zero: at rest).  They write nothing: one.lua and compound.lua do.
--
-- Every time, count and product is a num (num.lua, joined before this):
-- exact for every policy within SRL_PERMITS_MAX and SRL_WINDOW_MAX_NS, and
-- for any time since the epoch (no horizon).  Waits go out as decimal
-- strings (they may pass 2^53), counts as integers (below 2^32).
if redis.replicate_commands then redis.replicate_commands() end
local c = redis.call('HMGET', KEYS[2], 'esec', 'eusec')
if not c[1] or not c[2] then return redis.error_reply('SRLNOCFG the prefix has no config hash') end
local ZERO, ONE, TWO = N(0), N(1), N(2)
local now
if ARGV[5] ~= '' then now = S(ARGV[5]) else
  local t = redis.call('TIME')
  -- us since the epoch: below 2^53 for 285 years, so exact as a double.
  local us = (tonumber(t[1]) - tonumber(c[1])) * 1000000 + (tonumber(t[2]) - tonumber(c[2]))
  if us < 0 then us = 0 end
  now = mul(N(us), N(1000))
end
local cost, costn = S(ARGV[2]), tonumber(ARGV[2])
local commit = ARGV[1] == 'a'
local maxw = S(ARGV[7])
local reserve = commit and not iszero(maxw)
local dry = ARGV[8] == '1'
local MS = N(1000000)
local function px(ns) local m = cdiv(ns, MS) if iszero(m) then m = ONE end return str(m) end
local function count(ok)
  if not commit then return end
  redis.call('HINCRBY', KEYS[3], ok and 'allowed' or 'denied', 1)
  if dry and not ok then redis.call('HINCRBY', KEYS[3], 'would_deny', 1) end
end
-- decide() at time t instead of now (a reservation acts at now + wait):
-- the algorithms read now, so it moves for the one call.
local function decide_at(t, decide, ...)
  local n0 = now
  now = t
  local rep, new, rest = decide(...)
  now = n0
  return rep, new, rest
end
local function put(val, rest) if not iszero(rest) then redis.call('SET', KEYS[1], val, 'PX', px(rest)) else redis.call('DEL', KEYS[1]) end end
local algo = {}
