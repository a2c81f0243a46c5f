-- resume.lua - ends the recovery of a key set (docs/recovery.md): lifts its
-- admission count above what the database and the callers have seen, keeps
-- new stream ids above every persisted one, takes out stock this segment
-- lent and forgot, pays oversold units back from stock, and lifts the
-- fence when nothing is oversold any more.
-- KEYS: meta stock orders
-- ARGV: watermark (highest admission number persisted), max_sid (greatest
--       stream id of a persisted order, '' for none), open ('1' | '0' | '':
--       the switch as the database records it, '' keeps it), lent (units a
--       receiver applied that this segment forgot lending, '' or 0), xseq
--       (highest transfer number of this segment a receiver knows, '' or 0),
--       over (units to count oversold on top, '' or 0), xout (the segment's
--       xout counter lent was computed against: lent is applied only while
--       it still reads so, once)
-- Returns {rc, units still oversold, stock, 1 fence lifted | 0 kept,
--          acknowledged admissions counted lost now, adm}
--
-- lost: callers saw admission numbers up to fence_adm; the database holds
-- up to the watermark and this Redis up to adm, so the numbers above both
-- were answered 200 and reached neither (they cannot be rebuilt).
--#include "lib/args.lua"
--#include "lib/fence.lua"
local function num(v, max)
  if v == nil or v == '' then return 0 end
  if not digits(v, max) then return nil end
  return tonumber(v)
end
local wm, lent = num(ARGV[A_RESUME.watermark], 15), num(ARGV[A_RESUME.lent], 15)
local xseq, over_add = num(ARGV[A_RESUME.xseq], 15), num(ARGV[A_RESUME.over], 15)
local xout_seen = num(ARGV[A_RESUME.xout], 15)
local sid, open = ARGV[A_RESUME.max_sid] or '', ARGV[A_RESUME.open] or ''
if not wm or not lent or not xseq or not over_add or not xout_seen
   or (ARGV[A_RESUME.watermark] or '') == ''
   or (sid ~= '' and not string.match(sid, '^[0-9]+%-[0-9]+$')) or #sid > 41
   or (open ~= '' and open ~= '0' and open ~= '1') or ARGV[A_RESUME.N + 1] then
  return bad_args(0, -1, 0, 0, 0)
end
local m = redis.call('HMGET', KEYS[K_RESUME.meta], M_RESUME.FIELDS)
local stock = tonumber(redis.call('GET', KEYS[K_RESUME.stock]) or '')
if not m[M_RESUME.initial] or not stock then return {RC.UNKNOWN_ACTIVITY, 0, -1, 0, 0, 0} end
local adm0 = tonumber(m[M_RESUME.adm] or '0')
if not m[M_RESUME.fence] then
  return {RC.OK, tonumber(m[M_RESUME.oversold] or '0'), stock, 1, 0, adm0}
end
-- Admission numbers: above the database's and every caller's.
local seen, base = tonumber(m[M_RESUME.fence_adm] or '0'), math.max(adm0, wm)
local lost = seen > base and seen - base or 0
local adm = math.max(base, seen)
redis.call('HSET', KEYS[K_RESUME.meta], 'adm', adm)
redis.call('HDEL', KEYS[K_RESUME.meta], 'fence_adm')
if lost > 0 then redis.call('HINCRBY', KEYS[K_RESUME.meta], 'lost', lost) end
-- Stream ids: a promoted replica's clock may run behind the old master's,
-- and an order id used twice would be a new order the database drops as a
-- duplicate. New entries get ids above every persisted one, and a stream
-- made again here (it vanished: its id counter with it) starts above
-- Redis's clock too, so an id handed out before it vanished (acknowledged,
-- lost with it) is never handed out again. The stream and the worker's
-- group exist after a resume (meta `keys` says so, lib/admit.lua).
local fresh = redis.call('EXISTS', KEYS[K_RESUME.orders]) == 0
if fresh then redis.pcall('XGROUP', 'CREATE', KEYS[K_RESUME.orders], NAME.WORKER_GROUP, '0', 'MKSTREAM') end
local function sid_of(v)
  local ms, seq = string.match(v, '^([0-9]+)%-([0-9]+)$')
  return tonumber(ms), tonumber(seq)
end
local floor = sid
if fresh then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local fms = sid ~= '' and sid_of(sid) or 0
  if now > fms then floor = string.format('%.0f', now) .. '-0' end
end
if floor ~= '' then
  local info, last = redis.call('XINFO', 'STREAM', KEYS[K_RESUME.orders]), '0-0'
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1] end
  end
  local lms, lseq = sid_of(last)
  local sms, sseq = sid_of(floor)
  if lms < sms or (lms == sms and lseq < sseq) then
    redis.call('XSETID', KEYS[K_RESUME.orders], floor)
  end
end
local must = tonumber(redis.call('HGET', KEYS[K_RESUME.meta], 'keys') or '0') or 0
if must % 2 == 0 then redis.call('HSET', KEYS[K_RESUME.meta], 'keys', must + 1) end
-- Transfers this segment lent and forgot (a receiver applied them): the
-- units left here, and its transfer ids go on after the last one used.
-- Applied once: only while xout still reads what lent was computed
-- against (a second recovery racing this one finds it moved).
local over = tonumber(m[M_RESUME.oversold] or '0') + over_add
if lent > 0 and tonumber(m[M_RESUME.xout] or '0') == xout_seen then
  local take = math.min(stock, lent)
  stock, over = stock - take, over + lent - take
  redis.call('HINCRBY', KEYS[K_RESUME.meta], 'xout', lent)
end
if xseq > tonumber(m[M_RESUME.xseq] or '0') then
  redis.call('HSET', KEYS[K_RESUME.meta], 'xseq', xseq)
end
-- Oversold units are paid back first from stock given back since (an
-- operator cancelling orders sold twice, a payment timeout).
if over > 0 and stock > 0 then
  local take = math.min(stock, over)
  stock, over = stock - take, over - take
end
redis.call('SET', KEYS[K_RESUME.stock], stock)
redis.call('HSET', KEYS[K_RESUME.meta], 'oversold', over)
if over > 0 then
  fence_set(KEYS[K_RESUME.meta], 'oversold',
            over .. ' unit(s) were sold twice before the fence; the sale stays stopped',
            {relabel = true})
  return {RC.OK, over, stock, 0, lost, adm}
end
redis.call('HDEL', KEYS[K_RESUME.meta], 'fence', 'fence_ms', 'fence_why')
-- challenges made before now may have been spent in what was lost: refused
-- from here (lib/challenge.lua), the pages solve new ones
redis.call('HSET', KEYS[K_RESUME.meta], 'ch_floor', string.format('%.0f', now_ms()))
if open ~= '' then redis.call('HSET', KEYS[K_RESUME.meta], 'open', open) end
return {RC.OK, 0, stock, 1, lost, adm}
