-- each limit's ban period as src/core/penalty.c.  Also a single limit with a
-- ban period (n = 1).
-- ARGV[3]: the number of limits n (1..4); ARGV[9 + 5 (i - 1) ..]: limit i's
-- algorithm letter (t, g, c, l: the algo table's), permits, window,
-- capacity, ban period ('0': none).  P:k:<key> = the n limits' parts
-- joined by ';', each its state text ('' = a fresh one; a sliding log's
-- times joined by spaces) and, while it bans the key, '!' and the ban's
-- end; expiring when the last of them comes to rest.  The reply adds the
-- binding limit (0-based) to a decision: {allowed, remaining, retry_after,
-- reset_after, binding, ban started}; a tiered config's (tier.lua) adds the
-- tier that decided, a reservation's its wait, last.
local n = tonumber(ARGV[3])
-- L[i]: limit i's {letter, permits, window, capacity, ban period}; a tiered
-- config's (tier.lua) are the decided tier's, and the value starts with
-- the key's tier and '@'.
local L = {}
for i = 1, n do local b = 4 + 5 * i L[i] = {ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]} end
local tiered = tiers_read(9 + 5 * n)
local v = redis.call('GET', KEYS[1])
if not commit and not v then return {-1} end
local body, ktier = v, nil   -- the stored parts and the key's tier (tiered)
if tiered and v then
  local t, rest = string.match(v, '^(%d+)@(.*)$')
  if not t or not TIER[tonumber(t) + 1] then return redis.error_reply('SRLBAD tier') end
  body, ktier = rest, tonumber(t)
end
local tier = tiered and (treq or ktier or 0) or nil   -- the tier that decides
local from = tiered and TIER[(ktier or tier) + 1] or L
if tiered then L, n = TIER[tier + 1], #TIER[tier + 1] end
local part = {}
for i = 1, #from do part[i] = '' end
if body then
  local i = 0
  for s in string.gmatch(body .. ';', '([^;]*);') do i = i + 1 part[i] = s end
  if i ~= #from then return redis.error_reply('SRLBAD state') end
end
local pen, ban = {}, {}   -- limit i's ban period and end (ZERO: none)
for i = 1, #from do
  ban[i] = ZERO
  local b, u = string.match(part[i], '^([^!]*)!(%d+)$')
  if b then part[i], ban[i] = b, S(u) end
end
-- One limit's decision on state text s (nil: fresh) at cost c (nil: the
-- call's): its reply, new text (a sliding log's times joined by spaces)
-- and time to rest.
local function run(spec, s, c)
  local c0, n0 = cost, costn
  if c then cost, costn = N(c), c end
  local decide = algo[spec[1]]
  local P, W, CAP = S(spec[2]), S(spec[3]), S(spec[4])
  local rep, new, rest
  if spec[1] == 'l' then
    local raw = {}
    if s then for t in string.gmatch(s, '%S+') do raw[#raw + 1] = t end end
    rep, new, rest = decide(raw, P, W, CAP)
    if new then
      local out = {}
      for j = new.trim + 1, #raw - new.drop do out[#out + 1] = raw[j] end
      for j = 1, new.push do out[#out + 1] = new.stamp end
      new = table.concat(out, ' ')
    end
  else
    rep, new, rest = decide(s, P, W, CAP)
  end
  cost, costn = c0, n0
  return rep, new, rest
end
for i = 1, n do if not algo[L[i][1]] then return redis.error_reply('SRLBAD algorithm') end end
-- The key moves to another tier (only a request names one): converted,
-- written even if it is then denied (the host's slot is too).
local moved = tiered and ktier ~= nil and ktier ~= tier
local conv = ZERO   -- the converted parts' longest rest
local changed = moved and not same_limits(from, L)
if changed then
  local np, nr = tier_convert(run, from, L, part, ban)
  if not np then return nr end
  part = np
  for i = 1, n do ban[i] = ZERO conv = max(conv, nr[i]) end
end
local reps, news, rests, all = {}, {}, {}, true
local function raise(rep, x)   -- retry_after and reset_after at least x
  if lt(S(rep[3]), x) then rep[3] = str(x) end
  if lt(S(rep[4]), x) then rep[4] = str(x) end
end
for i = 1, n do
  pen[i] = S(L[i][5])
  local rep, new, rest = run(L[i], part[i] ~= '' and part[i] or nil)
  if rep.err then return rep end
  if ARGV[1] ~= 'r' and lt(now, ban[i]) then
    -- Banned: denied whatever the algorithm says, and nothing written.
    rep[1], rep[2], new = 0, 0, nil
    raise(rep, sub(ban[i], now))
  end
  reps[i], news[i], rests[i] = rep, new, rest
  all = all and rep[1] ~= 0
end
-- The parts as they stand: a ban that has ended is dropped.
local function text(i)
  if lt(now, ban[i]) then return part[i] .. '!' .. str(ban[i]) end
  return part[i]
end
-- Write the new texts of the limits that changed; the key expires when the
-- last state comes to rest (a limit left as it was keeps at least the
-- key's time to live so far).
local function write(keep, states)
  local ms, any, out = keep, false, {}
  for i = 1, n do
    if states and news[i] then
      part[i] = iszero(rests[i]) and '' or news[i]
      if not iszero(rests[i]) then local m = tonumber(px(rests[i])) if m > ms then ms = m end end
    end
    if lt(now, ban[i]) then local m = tonumber(px(sub(ban[i], now))) if m > ms then ms = m end end
    out[i] = text(i)
    any = any or out[i] ~= ''
  end
  local val = table.concat(out, ';')
  if tiered then val = tier .. '@' .. val end
  if any and ms > 0 then redis.call('SET', KEYS[1], val, 'PX', ms)
  else redis.call('DEL', KEYS[1]) end
end
if ARGV[1] == 'r' then   -- every limit gets cost back; a ban stays
  write(redis.call('PTTL', KEYS[1]), true)
  return {-2}
end
-- The reply: a tiered config's adds the tier that decided, a reservation's
-- its wait (w), last.
local function fin(out, w)
  if tiered then out[#out + 1] = tier end
  if w then out[#out + 1] = w end
  return out
end
-- A reservation (srl__compound_reserve): the longest wait of the limits'
-- decisions above binds; within maxw and no ban, every limit takes cost at
-- now + wait, all or nothing, else the decision at now stands.
local wait, wb, held, fell = ZERO, 1, false, false
if reserve then
  for i = 1, n do
    local a = L[i][1]
    if a ~= 't' and a ~= 'g' then return redis.error_reply('SRLBAD reserve') end
    held = held or lt(now, ban[i])
    if reps[i][1] == 0 and lt(wait, S(reps[i][3])) then wait, wb = S(reps[i][3]), i end
  end
  if not iszero(wait) and not held and le(wait, maxw) then
    local at, r2, n2, rest2 = add(now, wait), {}, {}, {}
    for i = 1, n do
      r2[i], n2[i], rest2[i] = decide_at(at, algo[L[i][1]], part[i] ~= '' and part[i] or nil,
        S(L[i][2]), S(L[i][3]), S(L[i][4]))
      if r2[i][1] ~= 1 then fell = true break end
      rest2[i] = add(rest2[i], wait)
    end
    if not fell then
      news, rests = n2, rest2
      write(0, true)
      count(true)
      local reset = ZERO
      for i = 1, n do reset = max(reset, S(r2[i][4])) end
      return fin({1, 0, '0', str(add(reset, wait)), wb - 1, 0}, str(wait))
    end
  end
end
-- What a write that keeps the algorithm states keeps as time to live: the
-- converted parts' rest, else the key's time to live so far.
local function keep()
  if changed then return iszero(conv) and 0 or tonumber(px(conv)) end
  return v and redis.call('PTTL', KEYS[1]) or 0
end
local banned = false   -- this call started a ban (SRL_DECISION_BAN_STARTED)
if all and commit then write(0, true)
elseif commit then
  -- A committed denial: each limit that denied and is not banned yet bans
  -- the key for its period (a ban is not extended by what it refuses);
  -- no algorithm state changes.
  for i = 1, n do
    if reps[i][1] == 0 and not iszero(pen[i]) and not lt(now, ban[i]) then
      ban[i] = add(now, pen[i])
      raise(reps[i], pen[i])
      banned = true
    end
  end
  if banned or moved then write(keep(), false) end
end
count(all)
-- Fold as compound.c's fold(): the binding limit is the denier with the
-- longest retry_after, else the admitting one with the least remaining
-- (ties keep the earlier); remaining the least, reset_after the longest.
local bi, rem, reset = 1, reps[1][2], S(reps[1][4])
for i = 2, n do
  local a, c = reps[i], reps[bi]
  local more
  if a[1] ~= c[1] then more = a[1] == 0
  elseif a[1] == 0 then more = lt(S(c[3]), S(a[3]))
  else more = a[2] < c[2] end
  if more then bi = i end
  if a[2] < rem then rem = a[2] end
  local r = S(a[4])
  if lt(reset, r) then reset = r end
end
local out = {reps[bi][1], rem, reps[bi][3], str(reset), bi - 1, banned and 1 or 0}
local w
if reserve then
  if out[1] == 0 and not fell then
    -- Refused: retry when the wait is maxw or less, or the longest ban ends.
    local left = lt(maxw, wait) and sub(wait, maxw) or ZERO
    for i = 1, n do if lt(now, ban[i]) then left = max(left, sub(ban[i], now)) end end
    out[3] = str(left)
  end
  w = '0'
end
return fin(out, w)
