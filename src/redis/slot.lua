-- slot.lua - a cluster's slot hash P:s:{tag} (KEYS[1]): made on the first
-- decision in its slot, with the epoch of P:cfg (ARGV[1] esec, ARGV[2]
-- eusec; HSETNX: the first maker's epoch stays).
if redis.call('HSETNX', KEYS[1], 'esec', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'eusec', ARGV[2])
end
return 1
