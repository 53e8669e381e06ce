-- sliding_counter.lua - the sliding counter on Redis, a transcription of
-- src/core/algo_sliding_counter.c (after prologue.lua).  State "window_start
-- prev curr".
algo.c = function(v, P, W, CAP)
  local ws, prev, curr = sub(now, mod(now, W)), ZERO, ZERO
  if v then local a, b, d = string.match(v, '^(%d+) (%d+) (%d+)$')
    if not a then return redis.error_reply('SRLBAD state') end
    ws, prev, curr = S(a), S(b), S(d) end
  local t = max(now, ws)
  local behind = sub(t, now)
  local k = div(sub(t, ws), W)
  if cmp(k, ONE) == 0 then prev, curr, ws = curr, ZERO, add(ws, W)
  elseif not lt(k, TWO) then prev, curr, ws = ZERO, ZERO, sub(t, mod(t, W)) end
  local e = sub(t, ws)
  local function rest_of()
    if not iszero(curr) then return sub(mul(TWO, W), e) end
    if not iszero(prev) then return sub(W, e) end
    return ZERO
  end
  local function state(cu) return str(ws) .. ' ' .. str(prev) .. ' ' .. str(cu) end
  if ARGV[1] == 'r' then
    if iszero(curr) then return {-2} end
    curr = lt(cost, curr) and sub(curr, cost) or ZERO
    return {-2}, state(curr), add(behind, rest_of())
  end
  local est = add(mul(prev, sub(W, e)), mul(curr, W))
  local limit = mul(P, W)
  local after = add(est, mul(cost, W))
  local function solve(pv, A) local m = div(sub(A, ONE), pv) if not lt(m, W) then return ZERO end return sub(W, m) end
  if lt(sub(after, W), limit) then
    local rem = not lt(after, limit) and ZERO or cdiv(sub(limit, after), W)
    local reset = add(behind, sub(mul(TWO, W), e))
    return {1, dbl(rem), '0', str(reset)}, state(add(curr, cost)), reset
  end
  local rem = not lt(est, limit) and ZERO or cdiv(sub(limit, est), W)
  local wait = nil
  if le(add(curr, cost), P) and not iszero(prev) then
    local x = solve(prev, mul(sub(add(P, ONE), add(curr, cost)), W))
    if lt(x, W) then wait = sub(x, e) end
  end
  if not wait then
    wait = sub(W, e)
    if not iszero(curr) then wait = add(wait, solve(curr, mul(sub(add(P, ONE), cost), W))) end
  end
  local rest = rest_of()
  return {0, dbl(rem), str(add(behind, wait)), iszero(rest) and '0' or str(add(behind, rest))}
end
