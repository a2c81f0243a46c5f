-- purchase_batch.lua - N purchases of one activity (or one segment of it)
-- in one call, decided in arrival order; one bad entry never fails the others.
-- KEYS: meta stock buyers orders idem ledger xin wr_spent, then per purchase
--       its buyer's rate limiter key, then, when ip_rate is on, per purchase
--       its client IP's, then, when the call carries challenge tickets, per
--       purchase its challenge's spent key (lib/admit.lua)
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
--       ('' for none; docs/waiting-room.md), challenge ticket ('' for none;
--       lib/challenge.lua, docs/challenges.md)
-- Returns {rc_1, order_id_1, qty_1, rc_2, ..., stock after (-1: not read),
-- epoch, adm (the key set's after the call; 0, 0 when not read)};
-- a RATE_LIMITED entry carries its retry-after in ms in the qty slot, a
-- SEGMENTED entry the number of segments, an OK entry that replays an
-- earlier answer (Idempotency-Key) its quantity negated. A malformed call is answered
-- {BAD_ARGUMENT} alone (lib/args.lua).
--#include "lib/args.lua"
--#include "lib/admit.lua"
--#include "lib/xfer.lua"
local n = (#ARGV - A_BATCH.N) / A_BUY.N
local epoch, adm = ARGV[A_BATCH.epoch], ARGV[A_BATCH.adm]
if n < 1 or n ~= math.floor(n) or not label_ok(ARGV[A_BATCH.label])
   or not string.find(epoch, '^%d*$') or #epoch > 20 or not string.find(adm, '^%d*$') or #adm > 15
   or (epoch == '') ~= (adm == '') or not store_id_ok(ARGV[A_BATCH.store]) then
  return bad_args()
end
-- purchase i's arguments: ARGV[b + A_BUY.user] .. ARGV[b + A_BUY.ticket],
-- b = A_BUY.N * i + B0
local B0 = A_BATCH.N + 1 - A_BUY.N
local tickets = false
for i = 1, n do
  -- the challenge ticket (lib/admit.lua)
  if ARGV[A_BUY.N * i + (B0 + A_BUY.ticket)] ~= '' then tickets = true end
end
local keys_ok, chk = admit_keys_ok(n, ARGV[A_BATCH.ip_rate], tickets)
if not keys_ok then return bad_args() end
local xid, xqty = ARGV[A_BATCH.xfer_id], tonumber(ARGV[A_BATCH.xfer_qty]) or 0
-- A fenced segment takes no stock in: the transfer stays in transit and the
-- recovery rolls it forward (sk_seg_settle).
local meta = KEYS[K_PURCHASE.meta]
if xid ~= '' and xqty > 0 and not redis.call('HGET', meta, 'fence') then
  xfer_in(meta, KEYS[K_PURCHASE.stock], KEYS[K_PURCHASE.xin], xid, xqty)
end
local users, any_idem = {}, false
for i = 1, n do
  local b = A_BUY.N * i + B0
  users[i] = ARGV[b + A_BUY.user]
  if ARGV[b + A_BUY.idem] ~= '' then any_idem = true end
end
local c = {label = ARGV[A_BATCH.label], n = n, users = users, a = ARGV, at = A_BATCH.N + 1,
           any_idem = any_idem, chk = chk, store = ARGV[A_BATCH.store],
           rl = {u_rate = ARGV[A_BATCH.u_rate], u_burst = ARGV[A_BATCH.u_burst],
                 ip_rate = ARGV[A_BATCH.ip_rate], ip_burst = ARGV[A_BATCH.ip_burst]},
           mem = {epoch = epoch, adm = tonumber(adm) or 0}}
local out, left, epoch_after, adm_after = admit_all(c)
out[3 * n + 1] = left
out[3 * n + 2] = epoch_after
out[3 * n + 3] = adm_after
return out
