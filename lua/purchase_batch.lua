-- purchase_batch.lua - N purchases of one activity in one call, decided in
-- arrival order; one bad entry never fails the others.
-- KEYS: meta stock buyers orders
-- ARGV: activity_id, user_1, qty_1, user_2, qty_2, ...
-- Returns {rc_1, order_id_1, rc_2, order_id_2, ..., stock after}
--#include "lib/admit.lua"
local n = (#ARGV - 1) / 2
if n < 1 or n ~= math.floor(n) or not string.match(ARGV[1], '^[0-9]+$') then
  return redis.error_reply('purchase_batch: ARGV must be activity_id followed by user/qty pairs')
end
local out = {}
local rc, _, limit, maxq, stock = gate()
if rc ~= RC.OK then
  for i = 1, n do out[2 * i - 1] = rc; out[2 * i] = '' end
  out[2 * n + 1] = stock or 0
  return out
end
for i = 1, n do
  local r, oid
  r, oid, stock = admit(ARGV[1], ARGV[2 * i], ARGV[2 * i + 1], stock, limit, maxq)
  out[2 * i - 1] = r
  out[2 * i] = oid
end
out[2 * n + 1] = stock
return out
