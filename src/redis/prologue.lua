-- prologue.lua - the start of every decision script of the Redis store
-- (src/redis_store.c), joined before gcra.lua, token_bucket.lua,
-- sliding_log.lua or sliding_counter.lua at build time (embed.py).
--
-- KEYS: the key's state P:k:<key>, P:cfg (on a cluster the slot hash
-- P:s:{tag}), P:stats (on a cluster the slot hash again).
-- ARGV: mode ('a' acquire, 'p' peek, 'r' refund cost), cost, permits,
-- window_ns, injected now ('' = the server's TIME; non-empty only for a
-- limiter opened with a ticker in test mode).
-- Each script returns {-1} (peek or refund of a key with no state), {-2}
-- (refunded) or {allowed, remaining, retry_after, reset_after}, as the
-- algorithm of the same name in src/algo_*.c.  A state that comes to rest
-- is deleted (or expires then): a missing key is a fresh one.
--
-- Lua 5.1 numbers are doubles: every value must stay an integer below
-- 2^53 to be exact (exact_in_lua() in redis_store.c bounds the policies).
-- Integer division is floor(a/b) corrected by one step, since a/b in
-- doubles may round up to the next integer.
if redis.replicate_commands then redis.replicate_commands() end
local c = redis.call('HMGET', KEYS[2], 'esec', 'eusec')
if not c[1] or not c[2] then return redis.error_reply('SRLNOCFG the prefix has no config hash') end
local now
if ARGV[5] ~= '' then now = tonumber(ARGV[5]) else
  local t = redis.call('TIME')
  now = ((tonumber(t[1]) - tonumber(c[1])) * 1000000 + (tonumber(t[2]) - tonumber(c[2]))) * 1000
end
if now < 0 then now = 0 end
local cost, P, W = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local commit = ARGV[1] == 'a'
local function div(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function cdiv(a, b) local q = div(a, b) if q * b < a then q = q + 1 end return q end
local function fmt(x) return string.format('%.0f', x) end
local function px(ns) local m = cdiv(ns, 1000000) if m < 1 then m = 1 end return fmt(m) end
local function count(ok) if commit then redis.call('HINCRBY', KEYS[3], ok and 'allowed' or 'denied', 1) end end
local function put(val, rest) if rest > 0 then redis.call('SET', KEYS[1], val, 'PX', px(rest)) else redis.call('DEL', KEYS[1]) end end
