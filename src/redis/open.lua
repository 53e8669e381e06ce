-- open.lua - creates P:cfg or checks it (srl_open_redis).  KEYS[1] = P:cfg.
-- ARGV[1]: this opener's policy text, or '' to adopt the stored one
-- (srl_open_redis with cfg NULL: never creates).  Returns {1, policy, esec,
-- eusec} (same policy, or adopted, or created), {0} (another policy is
-- stored) or {-1} (adopting, and nothing is stored).
if redis.replicate_commands then redis.replicate_commands() end
local c = redis.call('HMGET', KEYS[1], 'policy', 'esec', 'eusec')
if c[1] then
  if ARGV[1] ~= '' and c[1] ~= ARGV[1] then return {0} end
  return {1, c[1], c[2] or '0', c[3] or '0'}
end
if ARGV[1] == '' then return {-1} end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'policy', ARGV[1], 'esec', t[1], 'eusec', t[2])
return {1, ARGV[1], t[1], t[2]}
