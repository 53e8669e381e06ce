-- sliding_log.lua - the sliding log on Redis, a transcription of
-- src/core/algo_sliding_log.c (after prologue.lua).  State: the admission
-- times, oldest first (alone: a Redis list; in a compound: the times
-- joined by spaces).  algo.l takes them as an array of decimal strings and
-- returns, instead of a new text, the change: {trim = the oldest entries
-- to drop, drop = the newest to drop, push = copies of stamp to append}.
algo.l = function(raw, P, W, CAP)
  local n, Pn = #raw, dbl(P)
  -- Entries are parsed as they are looked at: the expired ones, then at
  -- most three more (the newest, the one a denial waits for, the last
  -- refunded).
  local ts = setmetatable({}, {__index = function(t, i) local x = S(raw[i]) rawset(t, i, x) return x end})
  local ex = 0
  while ex < n and le(add(ts[ex + 1], W), now) do ex = ex + 1 end
  local live = n - ex
  local function until_(i) return sub(add(ts[i], W), now) end
  if ARGV[1] == 'r' then
    local drop = costn < live and costn or live
    if live - drop == 0 then return {-2}, {trim = n, drop = 0, push = 0}, ZERO end
    return {-2}, {trim = 0, drop = drop, push = 0}, until_(n - drop)
  end
  if live + costn <= Pn then
    local newest = live > 0 and ts[n] or ZERO
    local stamp = max(newest, now)
    local rest = sub(add(stamp, W), now)
    return {1, Pn - live - costn, '0', str(rest)}, {trim = ex, drop = 0, push = costn, stamp = str(stamp)}, rest
  end
  local k = live + costn - Pn - 1
  return {0, Pn - live, str(until_(ex + k + 1)), str(until_(n))}
end
