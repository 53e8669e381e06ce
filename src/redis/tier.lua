-- tier.lua - a key's tier on Redis (after the four algorithm files, before
-- compound.lua, which calls it): the config's tier table read from ARGV and
-- the conversion of a key's parts from its stored tier to another, a
-- transcription of srl__tier_convert (src/limiter/tiers.c) and of
-- decide_slot's rule (src/shm/shm_table.c): tiers of equal limits share the
-- state as it is; another tier's limits of the same shape carry each limit's
-- use (capacity less what a peek of cost 1 leaves, a ban leaving none),
-- capped at the new capacity, into a fresh state at now; any other shape
-- starts fresh.  A ban in force ends with the move (its use stays).
-- ARGV after a compound's limits (B = 9 + 5 n): the request's tier ('own':
-- the key's stored one; srl_peek and srl_refund), the table's count m
-- (2..16), then for each tier 0..m-1 its number of limits and 5 arguments
-- per limit as compound.lua's.  Nothing here writes: compound.lua does.
local TIER, treq = {}, nil
local function tiers_read(B)
  if ARGV[B] == nil then return false end
  treq = ARGV[B] ~= 'own' and tonumber(ARGV[B]) or nil
  local m, o = tonumber(ARGV[B + 1]), B + 2
  for j = 1, m do
    local k, s = tonumber(ARGV[o]), {}
    for i = 1, k do local p = o + 1 + 5 * (i - 1) s[i] = {ARGV[p], ARGV[p + 1], ARGV[p + 2], ARGV[p + 3], ARGV[p + 4]} end
    TIER[j] = s
    o = o + 1 + 5 * k
  end
  return true
end
local function same_limits(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do for f = 1, 5 do if a[i][f] ~= b[i][f] then return false end end end
  return true
end
-- run(spec, s, c): one limit's decision on state text s (nil: fresh) at
-- cost c: reply, new text, rest (compound.lua's).  bans[i]: the end of limit
-- i's ban (ZERO: none).  Returns the new parts and their rests.
local function tier_convert(run, from, to, part, bans)
  local out, rests = {}, {}
  for i = 1, #to do out[i], rests[i] = '', ZERO end
  if #from ~= #to then return out, rests end
  for i = 1, #to do if from[i][1] ~= to[i][1] then return out, rests end end
  for i = 1, #to do
    local capo, capn = tonumber(from[i][4]), tonumber(to[i][4])
    local left = 0
    if not lt(now, bans[i]) then
      local rep = run(from[i], part[i] ~= '' and part[i] or nil, 1)
      if rep.err then return nil, rep end
      if rep[1] == 1 then left = rep[2] + 1 end
    end
    if left > capo then left = capo end
    local used = capo - left
    if used > capn then used = capn end
    if used > 0 then
      local rep, new, rest = run(to[i], nil, used)
      if rep.err then return nil, rep end
      out[i], rests[i] = new, rest
    end
  end
  return out, rests
end
