-- concurrency.lua - in-flight (concurrency:N) units on Redis, after num.lua
-- and prologue.lua (its KEYS, the time `now`, P:cfg's check).  A single
-- concurrency limit only: a compound holding one is refused at open.
--
-- P:k:<key> is a hash (one key, so one slot in Cluster): field '#' the
-- last generation handed out (1..2^32-1, wrapping past 0), and one field
-- per held unit, named by its generation, valued "HOST PID START EXP
-- NONCE": the holder's host id (boot id and PID namespace:
-- src/redis/redis_lease.c), pid and start time (/proc, src/base/proc.c),
-- the unit's expiry in ns since P:cfg's epoch (now + the lease time
-- ARGV[4]: max_hold, else the default of srl.h) and a number the holder
-- never gave another unit.  The key expires (PEXPIRE) with its newest
-- unit, so generations start again: the nonce tells a lease of the key's
-- last life from one of this life with the same generation and holder.
--
-- ARGV[1]: 'e' enter, 'v' leave, 'p' peek; [3] N; [4] lease ns; [8] dry;
-- [9] HOST, [10] PID, [11] START of the caller; [12] enter: the
-- generations of this host's holders the caller found dead (spaces; '')
-- leave: the unit's generation; [13] the caller's nonce for the unit.
-- Enter drops the expired units, and those of [12] that are this host's,
-- then admits if fewer than N remain: {1, remaining, '0', reset_after,
-- gen}; else {0, 0, retry_after, reset_after, 0, then one "GEN PID START"
-- per unit of HOST} so the caller can judge its own holders (a dead one
-- comes back at the caller's next call, which names it in [12]).  Peek:
-- the same without writing, for ARGV[2] units (gen 0, no holders; a
-- denial's remaining the units free), {-1} with no key.
-- Leave: {-2} if the unit of that generation is held by exactly this
-- holder with this nonce (deleted), else {-1}.  A stored value of another form: SRLBAD.
local N1, LEASE = tonumber(ARGV[3]), S(ARGV[4])
local host, pid, start, nonce = ARGV[9], ARGV[10], ARGV[11], ARGV[13]
local function holder(v)
  return string.match(v, '^(%S+) (%d+) (%d+) (%d+) (%d+)$')
end
if ARGV[1] == 'v' then
  local v = redis.call('HGET', KEYS[1], ARGV[12])
  if not v then return {-1} end
  local h, p, s, e, o = holder(v)
  if not h then return redis.error_reply('SRLBAD state') end
  if h ~= host or p ~= pid or s ~= start or o ~= nonce then return {-1} end
  redis.call('HDEL', KEYS[1], ARGV[12])
  return {-2}
end
if ARGV[1] ~= 'e' and ARGV[1] ~= 'p' then return redis.error_reply('SRLBAD mode') end
local enter = ARGV[1] == 'e'
local dead = {}
for g in string.gmatch(ARGV[12], '%d+') do dead[g] = true end
local all = redis.call('HGETALL', KEYS[1])
if not enter and #all == 0 then return {-1} end
local held, mine, soon = 0, {}, nil
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if f ~= '#' then
    local h, p, s, e = holder(v)
    if not h or not string.match(f, '^%d+$') then return redis.error_reply('SRLBAD state') end
    local exp = S(e)
    if enter and (not lt(now, exp) or (dead[f] and h == host)) then
      redis.call('HDEL', KEYS[1], f)   -- expired, or its process died
    else
      held = held + 1
      if h == host then mine[#mine + 1] = f .. ' ' .. p .. ' ' .. s end
      local left = lt(now, exp) and sub(exp, now) or ZERO
      if lt(LEASE, left) then left = LEASE end   -- the server's clock stepped back
      if not soon or lt(left, soon) then soon = left end
    end
  end
end
-- A peek of cost c asks whether c units are free (as algo_concurrency.c);
-- an enter takes one.  A denial's remaining is what is free (0 for enter).
local want = enter and 1 or costn
local ok = held + want <= N1
local function stat(name) redis.call('HINCRBY', KEYS[3], name, 1) end
if not enter then
  return {ok and 1 or 0, ok and N1 - held - want or math.max(N1 - held, 0), ok and '0' or str(soon),
          str(soon or ZERO), 0}
end
if not ok then
  stat('denied')
  if dry then stat('would_deny') end
  local rep = {0, 0, str(soon), str(soon), 0}
  for i = 1, #mine do rep[#rep + 1] = mine[i] end
  return rep
end
-- A generation no unit holds: at most N are taken, so this ends quickly.
local g
repeat
  g = redis.call('HINCRBY', KEYS[1], '#', 1)
  if g > 4294967295 then redis.call('HSET', KEYS[1], '#', 0) g = 0 end
until g ~= 0 and redis.call('HEXISTS', KEYS[1], tostring(g)) == 0
redis.call('HSET', KEYS[1], tostring(g), host .. ' ' .. pid .. ' ' .. start .. ' ' .. str(add(now, LEASE)) .. ' ' .. nonce)
redis.call('PEXPIRE', KEYS[1], px(LEASE))
stat('allowed')
if not soon or lt(LEASE, soon) then soon = LEASE end
return {1, N1 - held - 1, '0', str(soon), g}
