-- sliding_counter.lua - the sliding counter on Redis, a transcription of
-- src/algo_sliding_counter.c (after prologue.lua).  P:k:<key> =
-- "window_start prev curr"; every product is below 4 * permits * W < 2^53
-- (checked at open).
local v = redis.call('GET', KEYS[1])
if not commit and not v then return {-1} end
local ws, prev, curr = now - now % W, 0, 0
if v then local a, b, d = string.match(v, '^(%d+) (%d+) (%d+)$')
  if not a then return redis.error_reply('SRLBAD state') end
  ws, prev, curr = tonumber(a), tonumber(b), tonumber(d) end
local t = now > ws and now or ws
local behind = t - now
local k = div(t - ws, W)
if k == 1 then prev, curr, ws = curr, 0, ws + W elseif k >= 2 then prev, curr, ws = 0, 0, t - t % W end
local e = t - ws
if ARGV[1] == 'r' then
  if curr == 0 then return {-2} end
  curr = cost < curr and curr - cost or 0
  local rest = curr > 0 and 2 * W - e or (prev > 0 and W - e or 0)
  put(fmt(ws) .. ' ' .. fmt(prev) .. ' ' .. fmt(curr), behind + rest)
  return {-2}
end
local est = prev * (W - e) + curr * W
local limit = P * W
local after = est + cost * W
local function solve(pv, A) local m = div(A - 1, pv) if m >= W then return 0 end return W - m end
if after - W < limit then
  local rem = after >= limit and 0 or cdiv(limit - after, W)
  local reset = behind + 2 * W - e
  if commit then redis.call('SET', KEYS[1], fmt(ws) .. ' ' .. fmt(prev) .. ' ' .. fmt(curr + cost), 'PX', px(reset)) end
  count(true)
  return {1, rem, 0, reset}
end
count(false)
local rem = est >= limit and 0 or cdiv(limit - est, W)
local wait = nil
if curr + cost - 1 < P and prev > 0 then
  local x = solve(prev, (P - curr - cost + 1) * W)
  if x < W then wait = x - e end
end
if not wait then
  wait = W - e
  if curr > 0 then wait = wait + solve(curr, (P - cost + 1) * W) end
end
local rest = curr > 0 and 2 * W - e or (prev > 0 and W - e or 0)
return {0, rem, behind + wait, rest > 0 and behind + rest or 0}
