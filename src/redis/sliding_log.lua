-- sliding_log.lua - the sliding log on Redis, a transcription of
-- src/core/algo_sliding_log.c (after prologue.lua).  P:k:<key> = a list of
-- admission times, oldest first.
local n = redis.call('LLEN', KEYS[1])
if not commit and n == 0 then return {-1} end
-- Entries are parsed as they are looked at: the expired ones, then at most
-- three more (the newest, the one a denial waits for, the last refunded).
local raw = redis.call('LRANGE', KEYS[1], 0, -1)
local ts = setmetatable({}, {__index = function(t, i) local x = S(raw[i]) rawset(t, i, x) return x end})
local ex = 0
while ex < n and le(add(ts[ex + 1], W), now) do ex = ex + 1 end
local live = n - ex
local function until_(i) return sub(add(ts[i], W), now) end
if ARGV[1] == 'r' then
  local drop = costn < live and costn or live
  for i = 1, drop do redis.call('RPOP', KEYS[1]) end
  if live - drop == 0 then redis.call('DEL', KEYS[1])
  elseif drop > 0 then redis.call('PEXPIRE', KEYS[1], px(until_(n - drop))) end
  return {-2}
end
if live + costn <= Pn then
  local newest = live > 0 and ts[n] or ZERO
  local stamp = max(newest, now)
  local rest = sub(add(stamp, W), now)
  if commit then
    if ex > 0 then redis.call('LTRIM', KEYS[1], ex, -1) end
    local s = str(stamp)
    for i = 1, costn do redis.call('RPUSH', KEYS[1], s) end
    redis.call('PEXPIRE', KEYS[1], px(rest))
  end
  count(true)
  return {1, Pn - live - costn, '0', str(rest)}
end
count(false)
local k = live + costn - Pn - 1
return {0, Pn - live, str(until_(ex + k + 1)), str(until_(n))}
