-- xfer_in.lua - completes a transfer whose receiving half never ran (the
-- borrower died between the two calls): reconcile rolls it forward.
-- KEYS: meta stock xin (of the receiving segment)
-- ARGV: xfer_id qty [recover]
-- Returns {rc (TRANSFERRED, or BAD_ARGUMENT / UNKNOWN_ACTIVITY / RECOVERING),
--          1 applied now | 0 before}
-- A fenced segment (docs/recovery.md) takes stock in only from the recovery
-- itself (its argument recover = 'recover'), which settles transfers before it replays.
--#include "lib/args.lua"
--#include "lib/xfer.lua"
local id, qty = ARGV[A_XFER_IN.id] or '', tonumber(ARGV[A_XFER_IN.qty] or '')
local rec = ARGV[A_XFER_IN.recover]
if id == '' or not qty or qty < 1 or qty % 1 ~= 0 or (rec and rec ~= 'recover') then
  return bad_args(0)
end
if redis.call('EXISTS', KEYS[K_XFER_IN.stock]) == 0 then return {RC.UNKNOWN_ACTIVITY, 0} end
local meta, stock = KEYS[K_XFER_IN.meta], KEYS[K_XFER_IN.stock]
if rec ~= 'recover' and redis.call('HGET', meta, 'fence') then return {RC.RECOVERING, 0} end
return {RC.TRANSFERRED, xfer_in(meta, stock, KEYS[K_XFER_IN.xin], id, qty)}
