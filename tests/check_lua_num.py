#!/usr/bin/env python3
"""check_lua_num.py LUA NUM_LUA - src/redis/num.lua's arithmetic against
Python's exact integers, run by Debian's lua5.1 (the Redis scripts' Lua).

divmod (both of its shortcuts: doubles below 2^52, limb by limb for a
divisor below 2^29, and the shift-and-subtract rest), mul, add, sub, the
decimal S/str round trip, on fixed edges (2^29, 2^52, 2^53 and either side;
quotients one short of an integer, where a double's rounded quotient lands
on the integer) and on 3000 seeded random pairs over every magnitude a
decision makes (up to 2^94).  Exit 1 at the first difference, naming it.
"""
import os
import random
import subprocess
import sys
import tempfile

lua, num = sys.argv[1], sys.argv[2]
cases = []
edges = [1, 2, 3, 2**24 - 1, 2**24, 2**29 - 1, 2**29, 2**29 + 1, 10**9, 2**48, 2**52 - 1,
         2**52, 2**52 + 1, 2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, 2**94 - 1]
for a in edges:
    for b in edges:
        cases.append((a, b))
for y in (2**26 - 3, 2**26 + 1, 3 * 2**24 + 7, 10**9 + 7, 2**51 - 1):
    for q in (2**26 - 1, 2**25 + 3, 2**52 // y - 1, 2**52 // y):
        for d in (-1, 0, 1):
            x = q * y + d
            if x >= 0:
                cases.append((x, y))
rng = random.Random(20261207)
for _ in range(3000):
    a = rng.getrandbits(rng.randint(1, 94))
    b = rng.getrandbits(rng.randint(1, 60)) or 1
    cases.append((a, b))

driver = r'''
for line in io.lines() do
  local a, b = string.match(line, '^(%d+) (%d+)$')
  local x, y = S(a), S(b)
  local q, r = divmod(x, y)
  local m = (lt(x, N(4294967296)) and lt(y, N(4294967296))) and str(mul(x, y)) or '-'
  local s = le(y, x) and str(sub(x, y)) or '-'
  io.write(str(q), ' ', str(r), ' ', m, ' ', str(add(x, y)), ' ', s, ' ', str(x), '\n')
end
'''
# the script comes on stdin, the cases from a file
inp = "".join("%d %d\n" % c for c in cases)
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write(inp)
    path = f.name
try:
    src = open(num).read() + driver.replace("io.lines()", "io.lines(%r)" % path)
    out = subprocess.run([lua, "-"], input=src, capture_output=True, text=True)
finally:
    os.unlink(path)
if out.returncode != 0:
    print("FAIL: lua5.1:", out.stderr.strip())
    sys.exit(1)
lines = out.stdout.splitlines()
if len(lines) != len(cases):
    print("FAIL: %d answers for %d cases" % (len(lines), len(cases)))
    sys.exit(1)
for (a, b), line in zip(cases, lines):
    q, r, m, s, d, back = line.split(" ")
    want = [str(a // b), str(a % b),
            str(a * b) if a < 2**32 and b < 2**32 else "-",
            str(a + b), str(a - b) if b <= a else "-", str(a)]
    if [q, r, m, s, d, back] != want:
        print("FAIL: a=%d b=%d: num.lua says q r a*b a+b a-b a = %s, exact %s"
              % (a, b, line, " ".join(want)))
        sys.exit(1)
print("num.lua: %d cases exact (divmod, mul, add, sub, decimal round trip)" % len(cases))
