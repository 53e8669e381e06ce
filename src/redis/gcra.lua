-- gcra.lua - GCRA on Redis, a transcription of src/algo_gcra.c (after
-- prologue.lua).  P:k:<key> = the tat, ns since the epoch in P:cfg.
local T = cdiv(W, P)
local tau = P * T
local v = redis.call('GET', KEYS[1])
if not commit and not v then return {-1} end
local tat = tonumber(v or '0')
if ARGV[1] == 'r' then
  if tat <= now then return {-2} end
  local back = cost * T
  if back >= tat - now then tat = now else tat = tat - back end
  put(fmt(tat), tat - now)
  return {-2}
end
local base = tat > now and tat or now
local used = base - now
local need = base + cost * T - now
if need <= tau then
  if commit then put(fmt(base + cost * T), need) end
  count(true)
  return {1, div(tau - need, T), 0, need}
end
count(false)
local rem = 0
if used < tau then rem = div(tau - used, T) end
return {0, rem, need - tau, used}
