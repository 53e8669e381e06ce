-- compound.lua - the end of a compound's decision script (after prologue.lua
-- and all four algorithm files): every limit of a key decided in one call,
-- all or nothing, as srl__cmp_decide and srl__cmp_refund (src/compound.c).
-- ARGV[3]: the number of limits n (2..4); ARGV[7 + 4 (i - 1) ..]: limit i's
-- algorithm letter (t, g, c, l: the algo table's), permits, window,
-- capacity.  P:k:<key> = the n limits' state texts joined by ';' ('' = a
-- fresh one; a sliding log's times joined by spaces), expiring when the
-- last of them comes to rest.  The reply adds the binding limit (0-based)
-- to a decision: {allowed, remaining, retry_after, reset_after, binding}.
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
for i = 1, n do
  local b = 3 + 4 * i
  local decide = algo[ARGV[b]]
  if not decide then return redis.error_reply('SRLBAD algorithm') end
  local P, W, CAP = S(ARGV[b + 1]), S(ARGV[b + 2]), S(ARGV[b + 3])
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
  reps[i], news[i], rests[i] = rep, new, rest
  all = all and rep[1] ~= 0
end
-- Write the new texts of the limits that changed; the key expires when the
-- last state comes to rest (a limit left as it was keeps at least the
-- key's time to live so far).
local function write(keep)
  local ms, any = keep, false
  for i = 1, n do
    if news[i] then part[i] = iszero(rests[i]) and '' or news[i] end
    if news[i] and not iszero(rests[i]) then local m = tonumber(px(rests[i])) if m > ms then ms = m end end
    any = any or part[i] ~= ''
  end
  if any and ms > 0 then redis.call('SET', KEYS[1], table.concat(part, ';'), 'PX', ms)
  else redis.call('DEL', KEYS[1]) end
end
if ARGV[1] == 'r' then
  write(redis.call('PTTL', KEYS[1]))
  return {-2}
end
if all and commit then write(0) end
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
return {reps[bi][1], rem, reps[bi][3], str(reset), bi - 1}
