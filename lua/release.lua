-- release.lua - give an order's units back, once per order.
-- KEYS: meta stock buyers released(set of order ids) ledger
-- ARGV: label ("<ID>", or "<ID>.<seg>" for a segment) order_id user_id quantity
-- Returns {rc, units given back}
--
-- The order must be in the ledger, belong to user_id and be for quantity
-- units (so no caller can release an order twice under another id, or
-- someone else's order). The ledger entry is marked before any change, so
-- a second release is refused. Stock + sum(buyers) == initial holds, and
-- the cap at initial (for a segment: initial + xin - xout, what it owns)
-- is a second belt.
--#include "lib/args.lua"
--#include "lib/oid.lua"
local aid, oid = ARGV[A_RELEASE.label], ARGV[A_RELEASE.oid]
local user, qs = ARGV[A_RELEASE.user], ARGV[A_RELEASE.qty]
if not label_ok(aid) or not string.match(user or '', '^[0-9]+$')
   or not string.match(qs or '', '^[1-9][0-9]*$') or #qs > 9
   or not oid_ok(aid, oid) then
  return bad_args(0)
end
local q = tonumber(qs)
local mi = redis.call('HMGET', KEYS[K_RELEASE.meta], M_OWN.FIELDS)
local initial = tonumber(mi[M_OWN.initial])
if initial then
  initial = initial + tonumber(mi[M_OWN.xin] or '0') - tonumber(mi[M_OWN.xout] or '0')
end
if not initial then return {RC.UNKNOWN_ACTIVITY, 0} end
local rec = redis.call('HGET', KEYS[K_RELEASE.ledger], oid)
if not rec then return {RC.UNKNOWN_ORDER, 0} end
local ruser, rq, mark = string.match(rec, '^([0-9]+):([0-9]+)(.*)$')
if ruser ~= user or tonumber(rq) ~= q then return {RC.UNKNOWN_ORDER, 0} end
if mark ~= '' then return {RC.ALREADY_RELEASED, 0} end
local had = tonumber(redis.call('HGET', KEYS[K_RELEASE.buyers], user) or '0')
if had < q then return {RC.UNKNOWN_ORDER, 0} end
redis.call('HSET', KEYS[K_RELEASE.ledger], oid, rec .. ':released')
redis.call('SADD', KEYS[K_RELEASE.released], oid)
local stock = tonumber(redis.call('GET', KEYS[K_RELEASE.stock]) or '0')
local give = q
if stock + give > initial then give = initial - stock end
if give < 0 then give = 0 end
if give > 0 then redis.call('INCRBY', KEYS[K_RELEASE.stock], give) end
if had == q then
  redis.call('HDEL', KEYS[K_RELEASE.buyers], user)
else
  redis.call('HINCRBY', KEYS[K_RELEASE.buyers], user, -q)
end
redis.call('HINCRBY', KEYS[K_RELEASE.meta], 'released', give)
return {RC.RELEASED, give}
