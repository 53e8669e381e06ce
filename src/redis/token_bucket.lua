-- token_bucket.lua - the token bucket on Redis, a transcription of
-- src/core/algo_token_bucket.c (after prologue.lua).  State "last_ns frac
-- tokens"; the bucket holds CAP (burst=, else permits) and refills
-- permits per window.  A reservation (prologue.lua's decide_at) stores last
-- ahead of now, as the C's debt does.
algo.t = function(v, P, W, CAP)
  local last, frac, tokens = now, ZERO, CAP
  if v then local a, b, d = string.match(v, '^(%d+) (%d+) (%d+)$')
    if not a then return redis.error_reply('SRLBAD state') end
    last, frac, tokens = S(a), S(b), S(d) end
  local el = lt(last, now) and sub(now, last) or ZERO
  if not lt(tokens, CAP) then tokens, frac = CAP, ZERO else
    local units = add(frac, mul(el, P))
    local more, left = divmod(units, W)
    if not lt(more, sub(CAP, tokens)) then tokens, frac = CAP, ZERO else tokens, frac = add(tokens, more), left end
  end
  local function wait(want) if not lt(tokens, want) then return ZERO end return cdiv(sub(mul(sub(want, tokens), W), frac), P) end
  local behind = lt(now, last) and sub(last, now) or ZERO
  local nl = max(now, last)
  local function state() return str(nl) .. ' ' .. str(frac) .. ' ' .. str(tokens) end
  if ARGV[1] == 'r' then
    if not lt(tokens, CAP) then return {-2} end
    if lt(now, last) then
      -- In debt (a reservation stored last ahead of now): the level at
      -- last plus cost, moved back along the refill line by the whole ns
      -- it pays for, not before now (algo_token_bucket.c, "Debt").
      local units = add(add(mul(tokens, W), frac), mul(cost, W))
      local step = min(div(units, P), behind)
      units, nl = sub(units, mul(step, P)), sub(last, step)
      if not lt(units, mul(CAP, W)) then tokens, frac = CAP, ZERO else tokens, frac = divmod(units, W) end
      return {-2}, state(), add(sub(nl, now), wait(CAP))
    end
    if not lt(cost, sub(CAP, tokens)) then tokens, frac = CAP, ZERO else tokens = add(tokens, cost) end
    return {-2}, state(), add(behind, wait(CAP))
  end
  if not lt(tokens, cost) then
    tokens = sub(tokens, cost)
    local reset = add(behind, wait(CAP))
    return {1, dbl(tokens), '0', str(reset)}, state(), reset
  end
  return {0, dbl(tokens), str(add(behind, wait(cost))), str(add(behind, wait(CAP)))}
end
