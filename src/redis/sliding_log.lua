-- sliding_log.lua - the sliding log on Redis, a transcription of
-- src/algo_sliding_log.c (after prologue.lua).  P:k:<key> = a list of
-- admission times, oldest first.
local n = redis.call('LLEN', KEYS[1])
if not commit and n == 0 then return {-1} end
local ts = redis.call('LRANGE', KEYS[1], 0, -1)
for i = 1, #ts do ts[i] = tonumber(ts[i]) end
local ex = 0
while ex < n and ts[ex + 1] + W <= now do ex = ex + 1 end
local live = n - ex
if ARGV[1] == 'r' then
  local drop = cost < live and cost or live
  for i = 1, drop do redis.call('RPOP', KEYS[1]) end
  if live - drop == 0 then redis.call('DEL', KEYS[1])
  elseif drop > 0 then redis.call('PEXPIRE', KEYS[1], px(ts[n - drop] + W - now)) end
  return {-2}
end
if live + cost <= P then
  local newest = live > 0 and ts[n] or 0
  local stamp = newest > now and newest or now
  if commit then
    if ex > 0 then redis.call('LTRIM', KEYS[1], ex, -1) end
    local s = fmt(stamp)
    for i = 1, cost do redis.call('RPUSH', KEYS[1], s) end
    redis.call('PEXPIRE', KEYS[1], px(stamp + W - now))
  end
  count(true)
  return {1, P - live - cost, 0, stamp + W - now}
end
count(false)
local k = live + cost - P - 1
return {0, P - live, ts[ex + k + 1] + W - now, ts[n] + W - now}
