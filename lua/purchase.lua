-- purchase.lua - one atomic admission: switch, window, quantity, stock,
-- per-user limit, then decrement + count + order event, all or nothing.
-- KEYS: meta stock buyers orders       ARGV: activity_id user_id quantity
-- Returns {rc, order_id or '', stock after}
--#include "lib/admit.lua"
if not string.match(ARGV[1] or '', '^[0-9]+$') then return {RC.BAD_ARGUMENT, '', 0} end
local rc, _, limit, maxq, stock = gate()
if rc ~= RC.OK then return {rc, '', stock or 0} end
local r, oid, left = admit(ARGV[1], ARGV[2], ARGV[3], stock, limit, maxq)
return {r, oid, left}
