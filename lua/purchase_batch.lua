-- purchase_batch.lua - N purchases of one activity (or one segment of it)
-- in one call, decided in arrival order; one bad entry never fails the others.
-- KEYS: meta stock buyers orders idem ledger xin wr_spent, then per purchase
--       its buyer's rate limiter key, then, when ip_rate is on, per purchase
--       its client IP's (lib/admit.lua)
-- ARGV: label ("<ID>" or "<ID>.<seg>"), user_rate, user_burst, ip_rate,
--       ip_burst (the global rate limits, '0' = off; the activity's own
--       per-user limit in meta wins), xfer_id, xfer_qty (a transfer of stock
--       lent to this segment by another one, applied first and once; ''
--       and 0 for none; purchases refused for lack of stock are not
--       charged by the rate limiters, so their re-admission is charged
--       once), epoch and adm (what this caller saw last of the key set,
--       '' and '' when it knows nothing: the rollback guard of
--       docs/recovery.md), the caller's store identity (16 hex digits, ''
--       when it does not know it: not checked; docs/design.md, "The
--       store's identity"), then per purchase: user_id, quantity,
--       idempotency_key ('' for none), client_ip ('' for none), queue pass
--       ('' for none; docs/waiting-room.md)
-- Returns {rc_1, order_id_1, qty_1, rc_2, ..., stock after (-1: not read),
-- epoch, adm (the key set's after the call; 0, 0 when not read)};
-- a RATE_LIMITED entry carries its retry-after in ms in the qty slot, a
-- SEGMENTED entry the number of segments, an OK entry that replays an
-- earlier answer (Idempotency-Key) its quantity negated. A malformed call is answered
-- {BAD_ARGUMENT} alone (lib/args.lua).
--#include "lib/args.lua"
--#include "lib/admit.lua"
--#include "lib/xfer.lua"
local n = (#ARGV - 10) / 5
if n < 1 or n ~= math.floor(n) or not label_ok(ARGV[1]) or not string.find(ARGV[8], '^%d*$')
   or #ARGV[8] > 20 or not string.find(ARGV[9], '^%d*$') or #ARGV[9] > 15
   or (ARGV[8] == '') ~= (ARGV[9] == '') or not store_id_ok(ARGV[10])
   or not admit_keys_ok(n, ARGV[4]) then
  return bad_args()
end
local xid, xqty = ARGV[6], tonumber(ARGV[7]) or 0
-- A fenced segment takes no stock in: the transfer stays in transit and the
-- recovery rolls it forward (sk_seg_settle).
if xid ~= '' and xqty > 0 and not redis.call('HGET', KEYS[1], 'fence') then
  xfer_in(KEYS[1], KEYS[2], KEYS[7], xid, xqty)
end
local users, any_idem = {}, false
for i = 1, n do
  local b = 5 * i + 6
  users[i] = ARGV[b]
  if ARGV[b + 2] ~= '' then any_idem = true end
end
local c = {label = ARGV[1], n = n, users = users, a = ARGV, at = 11, any_idem = any_idem,
           store = ARGV[10],
           rl = {u_rate = ARGV[2], u_burst = ARGV[3], ip_rate = ARGV[4], ip_burst = ARGV[5]},
           mem = {epoch = ARGV[8], adm = tonumber(ARGV[9]) or 0}}
local out, left, epoch, adm = admit_all(c)
out[3 * n + 1] = left
out[3 * n + 2] = epoch
out[3 * n + 3] = adm
return out
