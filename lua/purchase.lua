-- purchase.lua - one atomic admission: switch, window, quantity, stock,
-- per-user limit, then decrement + count + order event, all or nothing.
-- KEYS: meta stock buyers orders idem ledger xin wr_spent, then the buyer's
--       rate limiter key (lib/admit.lua)
-- ARGV: label ("<ID>" or "<ID>.<seg>") user_id quantity [idempotency_key]
--       [queue pass] (docs/waiting-room.md)
-- Returns {rc, order_id or '', stock after (-1: not read), quantity admitted
-- (negated when an Idempotency-Key replays an earlier answer) or, for
-- RATE_LIMITED, the retry-after in ms; for SEGMENTED, the number of
-- segments}. No store identity is checked here (the service's
-- purchase_batch passes its own). Only the activity's own per-user rate limit (meta) applies
-- here; the global limits and the per-IP one travel with purchase_batch,
-- which the service uses.
-- Sold out and no Idempotency-Key: one GET and out, before anything else
-- is set up (this is most of the traffic once the stock is gone).
if (ARGV[4] or '') == '' and redis.call('GET', KEYS[2]) == '0' then return {RC.SOLD_OUT, '', 0, 0} end
--#include "lib/args.lua"
--#include "lib/admit.lua"
if not label_ok(ARGV[1]) or not ARGV[2] or not ARGV[3] or not admit_keys_ok(1, nil) then
  return bad_args('', -1, 0)
end
-- No memory of the key set here: the rollback guard's in-script check is
-- the service's (purchase_batch); the fence itself applies to every call.
local out, left = admit_all({label = ARGV[1], n = 1, users = {ARGV[2]},
                             a = {ARGV[2], ARGV[3], ARGV[4] or '', '', ARGV[5] or ''}, at = 1,
                             any_idem = (ARGV[4] or '') ~= '', rl = {}, store = '',
                             mem = {epoch = '', adm = 0}})
return {out[1], out[2], left, out[3]}
