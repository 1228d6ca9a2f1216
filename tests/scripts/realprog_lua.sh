#!/usr/bin/env bash
# realprog_lua.sh: lua5.4 on a table-heavy script (300k record tables,
# a hash of 100k string keys, half the records dropped and collected,
# string building, sorting, a table used as a growing array and queue),
# printing sums and a hash. Run without and with LD_PRELOAD=$HPM_LIB: the
# outputs must be identical. Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
require_tool lua5.4
t_tmpdir
cat >"$tmp/work.lua" <<'LUA'
local M = 1000000007
local t = {}
for i = 1, 300000 do t[i] = { id = i, name = "n" .. i, vals = { i, i * 2, i * 3 } } end
local m = {}
for i = 1, 300000, 3 do m["k" .. (i * 7919 % 1000003)] = t[i] end
for i = 1, 300000, 2 do t[i] = nil end
collectgarbage()
local s = 0
for k, v in pairs(m) do s = (s + v.id * #k + v.vals[3]) % M end
local alive = 0
for i = 2, 300000, 2 do alive = (alive + t[i].vals[2] + #t[i].name) % M end
local parts = {}
for i = 1, 100000 do parts[#parts + 1] = string.rep(string.char(65 + i % 26), i % 40) .. i end
local big = table.concat(parts, ",")
table.sort(parts)
local h = 0
for i = 1, #big, 97 do h = (h * 31 + big:byte(i)) % M end
local q, head = {}, 1
for i = 1, 200000 do
  q[#q + 1] = { i }
  if i % 3 == 0 then q[head] = nil; head = head + 1 end
end
local qs = 0
for i = head, #q do qs = (qs + q[i][1]) % M end
local grid = {}
for y = 1, 300 do
  grid[y] = {}
  for x = 1, 300 do grid[y][x] = (x * y) % 17 end
end
local gs = 0
for y = 1, 300 do for x = 1, 300 do gs = gs + grid[y][x] end end
print(s, alive, #big, h, parts[1000], #parts, qs, gs, collectgarbage("count") > 0)
LUA
compare_runs "lua5.4" lua5.4 "$tmp/work.lua"
t_done
