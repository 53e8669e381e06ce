-- gcra.lua - GCRA on Redis, a transcription of src/core/algo_gcra.c (after
-- prologue.lua).  State: the tat, ns since the epoch in P:cfg.
algo.g = function(v, P, W, CAP)
  local T = cdiv(W, P)
  local tau = mul(CAP, T)   -- burst tolerance: the capacity's worth of T
  local tat = v and S(v) or ZERO
  if ARGV[1] == 'r' then
    if le(tat, now) then return {-2} end
    local back = mul(cost, T)
    if not lt(back, sub(tat, now)) then tat = now else tat = sub(tat, back) end
    return {-2}, str(tat), sub(tat, now)
  end
  local base = max(tat, now)
  local used = sub(base, now)
  local need = sub(add(base, mul(cost, T)), now)
  if le(need, tau) then
    return {1, dbl(div(sub(tau, need), T)), '0', str(need)}, str(add(base, mul(cost, T))), need
  end
  local rem = ZERO
  if lt(used, tau) then rem = div(sub(tau, used), T) end
  return {0, dbl(rem), str(sub(need, tau)), str(used)}
end
