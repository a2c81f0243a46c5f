-- xfer_in.lua - completes a transfer whose receiving half never ran (the
-- borrower died between the two calls): reconcile rolls it forward.
-- KEYS: meta stock xin (of the receiving segment)
-- ARGV: xfer_id qty [recover]
-- Returns {rc (TRANSFERRED, or BAD_ARGUMENT / UNKNOWN_ACTIVITY / RECOVERING),
--          1 applied now | 0 before}
-- A fenced segment (docs/recovery.md) takes stock in only from the recovery
-- itself (ARGV[3] 'recover'), which settles transfers before it replays.
--#include "lib/args.lua"
--#include "lib/xfer.lua"
local id, qty = ARGV[1] or '', tonumber(ARGV[2] or '')
if id == '' or not qty or qty < 1 or qty % 1 ~= 0 or (ARGV[3] and ARGV[3] ~= 'recover') then
  return bad_args(0)
end
if redis.call('EXISTS', KEYS[2]) == 0 then return {RC.UNKNOWN_ACTIVITY, 0} end
if ARGV[3] ~= 'recover' and redis.call('HGET', KEYS[1], 'fence') then return {RC.RECOVERING, 0} end
return {RC.TRANSFERRED, xfer_in(KEYS[1], KEYS[2], KEYS[3], id, qty)}
