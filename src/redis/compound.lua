-- compound.lua - the end of a compound's decision script (after prologue.lua
-- and all four algorithm files): every limit of a key decided in one call,
-- all or nothing, as srl__cmp_decide and srl__cmp_refund (src/core/compound.c),
-- each limit's ban period as src/core/penalty.c.  Also a single limit with a
-- ban period (n = 1).
-- ARGV[3]: the number of limits n (1..4); ARGV[9 + 5 (i - 1) ..]: limit i's
-- algorithm letter (t, g, c, l: the algo table's), permits, window,
-- capacity, ban period ('0': none).  P:k:<key> = the n limits' parts
-- joined by ';', each its state text ('' = a fresh one; a sliding log's
-- times joined by spaces) and, while it bans the key, '!' and the ban's
-- end; expiring when the last of them comes to rest.  The reply adds the
-- binding limit (0-based) to a decision: {allowed, remaining, retry_after,
-- reset_after, binding, ban started}; a reservation's adds its wait.
local n = tonumber(ARGV[3])
local v = redis.call('GET', KEYS[1])
if not commit and not v then return {-1} end
local part = {}
for i = 1, n do part[i] = '' end
if v then
  local i = 0
  for s in string.gmatch(v .. ';', '([^;]*);') do i = i + 1 part[i] = s end
  if i ~= n then return redis.error_reply('SRLBAD state') end
end
local reps, news, rests, all = {}, {}, {}, true
local pen, ban = {}, {}   -- limit i's ban period and end (ZERO: none)
local function raise(rep, x)   -- retry_after and reset_after at least x
  if lt(S(rep[3]), x) then rep[3] = str(x) end
  if lt(S(rep[4]), x) then rep[4] = str(x) end
end
for i = 1, n do
  local b = 4 + 5 * i
  local decide = algo[ARGV[b]]
  if not decide then return redis.error_reply('SRLBAD algorithm') end
  local P, W, CAP = S(ARGV[b + 1]), S(ARGV[b + 2]), S(ARGV[b + 3])
  pen[i], ban[i] = S(ARGV[b + 4]), ZERO
  local body, u = string.match(part[i], '^([^!]*)!(%d+)$')
  if body then part[i], ban[i] = body, S(u) end
  local s = part[i] ~= '' and part[i] or nil
  local rep, new, rest
  if ARGV[b] == 'l' then
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
  if any and ms > 0 then redis.call('SET', KEYS[1], table.concat(out, ';'), 'PX', ms)
  else redis.call('DEL', KEYS[1]) end
end
if ARGV[1] == 'r' then   -- every limit gets cost back; a ban stays
  write(redis.call('PTTL', KEYS[1]), true)
  return {-2}
end
-- A reservation (srl__compound_reserve): the longest wait of the limits'
-- decisions above binds; within maxw and no ban, every limit takes cost at
-- now + wait, all or nothing, else the decision at now stands.
local wait, wb, held, fell = ZERO, 1, false, false
if reserve then
  for i = 1, n do
    local a = ARGV[4 + 5 * i]
    if a ~= 't' and a ~= 'g' then return redis.error_reply('SRLBAD reserve') end
    held = held or lt(now, ban[i])
    if reps[i][1] == 0 and lt(wait, S(reps[i][3])) then wait, wb = S(reps[i][3]), i end
  end
  if not iszero(wait) and not held and le(wait, maxw) then
    local at, r2, n2, rest2 = add(now, wait), {}, {}, {}
    for i = 1, n do
      local b = 4 + 5 * i
      r2[i], n2[i], rest2[i] = decide_at(at, algo[ARGV[b]], part[i] ~= '' and part[i] or nil,
        S(ARGV[b + 1]), S(ARGV[b + 2]), S(ARGV[b + 3]))
      if r2[i][1] ~= 1 then fell = true break end
      rest2[i] = add(rest2[i], wait)
    end
    if not fell then
      news, rests = n2, rest2
      write(0, true)
      count(true)
      local reset = ZERO
      for i = 1, n do reset = max(reset, S(r2[i][4])) end
      return {1, 0, '0', str(add(reset, wait)), wb - 1, 0, str(wait)}
    end
  end
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
  if banned then write(v and redis.call('PTTL', KEYS[1]) or 0, false) end
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
if reserve then
  if out[1] == 0 and not fell then
    -- Refused: retry when the wait is maxw or less, or the longest ban ends.
    local left = lt(maxw, wait) and sub(wait, maxw) or ZERO
    for i = 1, n do if lt(now, ban[i]) then left = max(left, sub(ban[i], now)) end end
    out[3] = str(left)
  end
  out[7] = '0'
end
return out
