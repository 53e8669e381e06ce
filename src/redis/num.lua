-- num.lua - exact non-negative integers for the Redis store's scripts,
-- joined first into every decision script (before prologue.lua).
--
-- Lua 5.1 numbers are doubles, exact only below 2^53, and a policy's
-- products reach permits * window < 2^32 * 2^59, times since the epoch
-- grow without end.  So every value a decision handles is a table of L
-- limbs base 2^24, least significant first: 120 bits, far above any value
-- a decision makes (the largest, 4 * permits * window, is below 2^94; a
-- time is below 2^63 for 290 years).  Each limb step stays exact in
-- doubles: a limb product is below 2^48, a column sum of L of them plus a
-- carry below 2^51; short division keeps rem * 2^24 + limb below 2^53.
-- Values come in and go out as decimal strings (ARGV, the state, the
-- reply's waits), never as doubles beyond 2^53.
local B, L = 16777216, 5
local floor = math.floor
local function N(x)   -- x: a double integer, 0 <= x < 2^53
  local a = {}
  for i = 1, L do local q = floor(x / B) a[i] = x - q * B x = q end
  return a
end
local function cmp(a, b)
  for i = L, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end
local function lt(a, b) return cmp(a, b) < 0 end
local function le(a, b) return cmp(a, b) <= 0 end
local function iszero(a) for i = 1, L do if a[i] ~= 0 then return false end end return true end
local function add(a, b)
  local r, c = {}, 0
  for i = 1, L do
    local s = a[i] + b[i] + c
    if s >= B then r[i] = s - B c = 1 else r[i] = s c = 0 end
  end
  if c ~= 0 then error('SRLBAD num overflow') end
  return r
end
local function sub(a, b)   -- a >= b
  local r, c = {}, 0
  for i = 1, L do
    local s = a[i] - b[i] - c
    if s < 0 then r[i] = s + B c = 1 else r[i] = s c = 0 end
  end
  if c ~= 0 then error('SRLBAD num underflow') end
  return r
end
local function mul(a, b)
  local r = {}
  for i = 1, L do r[i] = 0 end
  for i = 1, L do
    if a[i] ~= 0 then
      local c = 0
      for j = 1, L - i + 1 do
        local s = r[i + j - 1] + a[i] * b[j] + c
        c = floor(s / B)
        r[i + j - 1] = s - c * B
      end
      if c ~= 0 then error('SRLBAD num overflow') end
      for j = L - i + 2, L do if b[j] ~= 0 then error('SRLBAD num overflow') end end
    end
  end
  return r
end
local function bits(a)
  for i = L, 1, -1 do
    if a[i] ~= 0 then local n, x = (i - 1) * 24, a[i] while x >= 1 do n = n + 1 x = floor(x / 2) end return n end
  end
  return 0
end
local SMALL = 536870912   -- 2^29: a divisor below it divides limb by limb
-- floor(a / b) and a % b; b > 0.
local function divmod(a, b)
  if iszero(b) then error('SRLBAD num division by zero') end
  -- Both below 2^52 (a hot key's units, a window in ns): in doubles, one
  -- division instead of a bit at a time.  x and y are exact; x / y rounded
  -- never reaches the next integer (x = q * y - 1 rounds up to q only when
  -- x >= 2^53), so its floor is the quotient; q * y <= x < 2^53 makes the
  -- remainder exact.  The correction below is a guard, never taken.
  if a[5] == 0 and a[4] == 0 and a[3] < 16 and b[5] == 0 and b[4] == 0 and b[3] < 16 then
    local x, y = a[1] + (a[2] + a[3] * B) * B, b[1] + (b[2] + b[3] * B) * B
    local q = floor(x / y)
    local r = x - q * y
    if r < 0 then q = q - 1 r = r + y elseif r >= y then q = q + 1 r = r - y end
    return N(q), N(r)
  end
  if lt(b, N(SMALL)) then
    local d, q, rem = b[1] + b[2] * B, {}, 0
    for i = L, 1, -1 do
      local cur = rem * B + a[i]
      local qi = floor(cur / d)
      rem = cur - qi * d
      if rem < 0 then qi = qi - 1 rem = rem + d elseif rem >= d then qi = qi + 1 rem = rem - d end
      q[i] = qi
    end
    return q, N(rem)
  end
  -- Shift and subtract, one bit of the quotient at a time.
  local q, r = N(0), N(0)
  for k = bits(a) - 1, 0, -1 do
    local c = 0
    for i = 1, L do local s = r[i] * 2 + c if s >= B then r[i] = s - B c = 1 else r[i] = s c = 0 end end
    local li = floor(k / 24) + 1
    local bit = floor(a[li] / 2 ^ (k % 24)) % 2
    r[1] = r[1] + bit
    if not lt(r, b) then
      r = sub(r, b)
      q[li] = q[li] + 2 ^ (k % 24)
    end
  end
  return q, r
end
local function div(a, b) local q = divmod(a, b) return q end
local function mod(a, b) local _, r = divmod(a, b) return r end
local function cdiv(a, b) local q, r = divmod(a, b) if not iszero(r) then q = add(q, N(1)) end return q end
local function min(a, b) return lt(a, b) and a or b end
local function max(a, b) return lt(a, b) and b or a end
-- Decimal text <-> num; S refuses anything but 1..36 digits.
local TEN6 = N(1000000)
local function S(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 36 then error('SRLBAD number') end
  local a = N(0)
  for i = 1, #s, 6 do
    local part = string.sub(s, i, i + 5)
    a = add(mul(a, N(10 ^ #part)), N(tonumber(part)))
  end
  return a
end
local function str(a)
  if iszero(a) then return '0' end
  local parts = {}
  while not iszero(a) do
    local q, r = divmod(a, TEN6)
    table.insert(parts, 1, r[1])
    a = q
  end
  local out = tostring(parts[1])
  for i = 2, #parts do out = out .. string.format('%06d', parts[i]) end
  return out
end
-- A num known to be below 2^53, as a double (a reply's count).
local function dbl(a) local x = 0 for i = L, 1, -1 do x = x * B + a[i] end return x end
