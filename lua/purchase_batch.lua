-- purchase_batch.lua - N purchases of one activity in one call, decided in
-- arrival order; one bad entry never fails the others.
-- KEYS: meta stock buyers orders idem ledger
-- ARGV: activity_id, then per purchase: user_id, quantity, idempotency_key ('' for none)
-- Returns {rc_1, order_id_1, qty_1, rc_2, ..., stock after (-1: not read)}
--#include "lib/admit.lua"
local n = (#ARGV - 1) / 3
if n < 1 or n ~= math.floor(n) or not string.match(ARGV[1], '^[0-9]+$') then
  return redis.error_reply('purchase_batch: ARGV must be activity_id then user/qty/key triples')
end
local out = {}
local rc, _, limit, maxq, stock = gate()
for i = 1, n do
  local r, oid, q
  local u, qs, k = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  if rc ~= RC.OK then
    r, oid, _, q = refuse_or_replay(rc, u, k, 0)
  else
    r, oid, stock, q = admit(ARGV[1], u, qs, k, stock, limit, maxq)
  end
  out[3 * i - 2] = r
  out[3 * i - 1] = oid
  out[3 * i] = q
end
-- -1: the call was refused before the stock was read (not 'sold out')
out[3 * n + 1] = stock or -1
return out
