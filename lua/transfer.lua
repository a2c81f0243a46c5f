-- transfer.lua - the lending half of a stock transfer between segments
-- (docs/segments.md): takes units from this segment for segment `to`.
-- KEYS: meta stock xout (of the lending segment)
-- ARGV: to (segment index) want (units the borrower needs) [epoch adm]
--       (what the caller saw last of this segment, docs/recovery.md: the
--       same epoch with a smaller admission count here fences it)
-- Returns {rc, units taken, transfer id or '', stock left here}
--
-- Takes max(want, half of what is left), capped at what is left: a drained
-- segment that borrows gets enough for its next buyers too, so stock flows
-- to where buyers are (rebalancing on demand) and halving keeps it from
-- sloshing back. Lends only while the sale is open. The units leave this
-- segment now and are recorded in xout under a fresh id; the borrower adds
-- them to its own segment with that id (purchase_batch or xfer_in), once.
-- A fenced segment (docs/recovery.md) lends nothing: its stock is being
-- rebuilt and may be units already sold.
--#include "lib/args.lua"
--#include "lib/fence.lua"
local to, want = ARGV[A_TRANSFER.to] or '', tonumber(ARGV[A_TRANSFER.want] or '')
local mem_epoch, mem_adm = ARGV[A_TRANSFER.epoch] or '', ARGV[A_TRANSFER.adm] or ''
if not string.find(to, '^%d+$') or not want or want < 1 or want % 1 ~= 0
   or not string.find(mem_epoch, '^%d*$') or #mem_epoch > 20 or not string.find(mem_adm, '^%d*$')
   or #mem_adm > 15 or (mem_epoch == '') ~= (mem_adm == '') then
  return bad_args(0, '', -1)
end
local stock = tonumber(redis.call('GET', KEYS[K_TRANSFER.stock]) or '')
if not stock then return {RC.UNKNOWN_ACTIVITY, 0, '', -1} end
if stock <= 0 then return {RC.SOLD_OUT, 0, '', 0} end
local m = redis.call('HMGET', KEYS[K_TRANSFER.meta], M_TRANSFER.FIELDS)
if m[M_TRANSFER.fence] then return {RC.RECOVERING, 0, '', stock} end
if mem_epoch ~= '' and m[M_TRANSFER.epoch] == mem_epoch
   and tonumber(m[M_TRANSFER.adm] or '0') < tonumber(mem_adm) then
  -- this segment went back in time: what it would lend may be sold already
  fence_set(KEYS[K_TRANSFER.meta], 'rollback', 'admission count ' .. (m[M_TRANSFER.adm] or '0') ..
            ' is behind the ' .. mem_adm .. ' a borrower saw: Redis lost writes', {seen = mem_adm})
  return {RC.RECOVERING, 0, '', stock}
end
if m[M_TRANSFER.open] ~= '1' then return {RC.CLOSED, 0, '', stock} end
local take = math.floor(stock / 2)
if take < want then take = want end
if take > stock then take = stock end
local id = m[M_TRANSFER.seg] .. '-' .. redis.call('HINCRBY', KEYS[K_TRANSFER.meta], 'xseq', 1)
redis.call('DECRBY', KEYS[K_TRANSFER.stock], take)
redis.call('HINCRBY', KEYS[K_TRANSFER.meta], 'xout', take)
redis.call('HSET', KEYS[K_TRANSFER.xout], id, to .. ':' .. take .. ':' .. now_ms())
return {RC.TRANSFERRED, take, id, stock - take}
