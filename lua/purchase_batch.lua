-- purchase_batch.lua - N purchases of one activity in one call, decided in
-- arrival order; one bad entry never fails the others.
-- KEYS: meta stock buyers orders idem ledger
-- ARGV: activity_id, then per purchase: user_id, quantity, idempotency_key ('' for none)
-- Returns {rc_1, order_id_1, qty_1, rc_2, ..., stock after (-1: not read)}
--#include "lib/admit.lua"
local n = (#ARGV - 1) / 3
if n < 1 or n ~= math.floor(n) or not string.find(ARGV[1], '^%d+$') then
  return redis.error_reply('purchase_batch: ARGV must be activity_id then user/qty/key triples')
end
local users, qtys, idems = {}, {}, {}
for i = 1, n do
  users[i] = ARGV[3 * i - 1]
  qtys[i] = ARGV[3 * i]
  idems[i] = ARGV[3 * i + 1]
end
local out, left = admit_all(ARGV[1], users, qtys, idems, n)
out[3 * n + 1] = left
return out
