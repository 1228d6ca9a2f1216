-- binary_trees.lua: an allocation-heavy Lua run for bench/real/realprog.c.
-- Lua allocates every table and string through realloc and free (its
-- l_alloc), so the allocator carries most of this script's time.
-- Usage: lua5.4 binary_trees.lua DEPTH STRINGS
-- Prints: "<nodes checked> <nodes of the long-lived tree> <length of the joined string>"
-- (realprog.c knows each value in closed form and checks them).
local function make(d)
  if d == 0 then return {} end
  d = d - 1
  return {make(d), make(d)}
end

local function check(t)
  if t[1] then return 1 + check(t[1]) + check(t[2]) end
  return 1
end

local depth = tonumber(arg[1])
local strings = tonumber(arg[2])
local long_lived = make(depth)
local total = 0
for d = 4, depth, 2 do
  local iters = 1 << (depth - d + 4)
  for _ = 1, iters do total = total + check(make(d)) end
end
local parts = {}
for i = 1, strings do parts[#parts + 1] = tostring(i) .. "x" end
local joined = table.concat(parts, ",")
print(total, check(long_lived), #joined)
