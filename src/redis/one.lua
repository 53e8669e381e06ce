-- one.lua - the end of a single limit's decision script (after prologue.lua
-- and the one algorithm file): ARGV[3], [4], [6] are its permits, window
-- and capacity, ARGV[7] a reservation's max_wait; P:k:<key> holds its state (a string; the sliding log's a
-- list, changed entry by entry).
local letter, decide = next(algo)
local P, W, CAP = S(ARGV[3]), S(ARGV[4]), S(ARGV[6])
local rep, new, rest
if letter == 'l' then
  local n = redis.call('LLEN', KEYS[1])
  if not commit and n == 0 then return {-1} end
  rep, new, rest = decide(redis.call('LRANGE', KEYS[1], 0, -1), P, W, CAP)
  if new and (commit or ARGV[1] == 'r') then
    if new.trim > 0 then redis.call('LTRIM', KEYS[1], new.trim, -1) end
    for i = 1, new.drop do redis.call('RPOP', KEYS[1]) end
    for i = 1, new.push do redis.call('RPUSH', KEYS[1], new.stamp) end
    if iszero(rest) then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], px(rest)) end
  end
else
  local v = redis.call('GET', KEYS[1])
  if not commit and not v then return {-1} end
  rep, new, rest = decide(v, P, W, CAP)
  if reserve and not rep.err then
    -- srl__compound_reserve of one limit: a denial whose wait is within
    -- maxw takes cost at now + wait (its state stored there), else the
    -- decision at now stands, its retry_after less maxw.
    if letter ~= 't' and letter ~= 'g' then return redis.error_reply('SRLBAD reserve') end
    local wait = rep[1] == 0 and S(rep[3]) or ZERO
    if not iszero(wait) and le(wait, maxw) then
      local r2, n2, rest2 = decide_at(add(now, wait), decide, v, P, W, CAP)
      if r2[1] == 1 then
        put(n2, add(rest2, wait))
        count(true)
        return {1, 0, '0', str(add(S(r2[4]), wait)), str(wait)}
      end
    elseif rep[1] == 0 then
      rep[3] = str(sub(wait, maxw))
    end
  end
  if new and (commit or ARGV[1] == 'r') then put(new, rest) end
end
if rep[1] == 0 or rep[1] == 1 then count(rep[1] == 1) end
if reserve and not rep.err then rep[5] = '0' end
return rep
