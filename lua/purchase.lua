-- purchase.lua - one atomic admission: switch, window, quantity, stock,
-- per-user limit, then decrement + count + order event, all or nothing.
-- KEYS: meta stock buyers orders idem ledger
-- ARGV: activity_id user_id quantity [idempotency_key]
-- Returns {rc, order_id or '', stock after (-1: not read), quantity admitted}
--#include "lib/admit.lua"
if not string.match(ARGV[1] or '', '^[0-9]+$') then return {RC.BAD_ARGUMENT, '', 0, 0} end
local idem = ARGV[4] or ''
local rc, _, limit, maxq, stock = gate()
if rc ~= RC.OK then
  local r, oid, left, q = refuse_or_replay(rc, ARGV[2], idem, stock or -1)
  return {r, oid, left, q}
end
local r, oid, left, q = admit(ARGV[1], ARGV[2], ARGV[3], idem, stock, limit, maxq)
return {r, oid, left, q}
