-- token_bucket.lua - the token bucket on Redis, a transcription of
-- src/algo_token_bucket.c (after prologue.lua).  P:k:<key> = "last_ns frac
-- tokens".  Refill is capped at one window of elapsed time (that already
-- fills any bucket), so units stay below W * (permits + 1) < 2^53
-- (checked at open).
local v = redis.call('GET', KEYS[1])
if not commit and not v then return {-1} end
local last, frac, tokens = now, 0, P
if v then local a, b, d = string.match(v, '^(%d+) (%d+) (%d+)$')
  if not a then return redis.error_reply('SRLBAD state') end
  last, frac, tokens = tonumber(a), tonumber(b), tonumber(d) end
local el = now > last and now - last or 0
if tokens >= P or el >= W then tokens, frac = P, 0 else
  local units = frac + el * P
  local add = div(units, W)
  if add >= P - tokens then tokens, frac = P, 0 else tokens, frac = tokens + add, units - add * W end
end
local function wait(want) if tokens >= want then return 0 end return cdiv((want - tokens) * W - frac, P) end
local behind = last > now and last - now or 0
if ARGV[1] == 'r' then
  if tokens >= P then return {-2} end
  if cost >= P - tokens then tokens, frac = P, 0 else tokens = tokens + cost end
  local nl = now > last and now or last
  put(fmt(nl) .. ' ' .. fmt(frac) .. ' ' .. fmt(tokens), behind + wait(P))
  return {-2}
end
if tokens >= cost then
  tokens = tokens - cost
  local reset = behind + wait(P)
  if commit then
    local nl = now > last and now or last
    redis.call('SET', KEYS[1], fmt(nl) .. ' ' .. fmt(frac) .. ' ' .. fmt(tokens), 'PX', px(reset))
  end
  count(true)
  return {1, tokens, 0, reset}
end
count(false)
return {0, tokens, behind + wait(cost), behind + wait(P)}
