-- replay.lua - puts database orders back into a key set that lost them
-- (docs/recovery.md), idempotently: an order its ledger already knows is
-- left alone, so a chunk may be sent twice.
-- KEYS: meta stock buyers ledger released idem
-- ARGV: label ("<ID>" or "<ID>.<seg>"), then per order (1..1000 of them):
--       order_id user_id quantity kind idempotency_key ('' none), kind 'h'
--       (held in the database: created, or cancelled with its release
--       still owed), 'p' (held and paid) or 'r' (cancelled and released in
--       the database)
-- Returns {rc, held orders put back, their units, released orders recorded,
--          releases applied again, units that did not fit, stock after,
--          orders refused, their units, paid orders put back over their
--          buyer's limit, idempotency records put back, then the 1-based
--          positions in ARGV's order list of the refused orders}
--
-- Held and unknown: ledger "user:qty", the buyer's count + qty, stock - qty,
-- and its Idempotency-Key's record (so a retry with the key answers it).
-- But this Redis's own history won over the one that was lost: a held
-- order that does not fit it - its buyer's key already bought another order
-- here, or its units would take the buyer over the limit, or the stock
-- below 0 - is refused (not written; the caller cancels it in the
-- database: under --sync-replicas such an order was never answered 200).
-- A paid order is never refused: it goes back, and units that do not fit
-- are counted in meta `oversold` (stock + sum(buyers) == own + oversold).
-- Released and unknown: ledger "user:qty:released" and the released set;
-- the stock is unchanged (this Redis saw neither the admission nor the
-- release). Released in the database but unmarked here (a release Redis
-- lost): released again exactly as release.lua does.
-- Only into a fenced key set; malformed arguments change nothing.
--#include "lib/args.lua"
--#include "lib/oid.lua"
local label = ARGV[A_REPLAY.label] or ''
local n = (#ARGV - A_REPLAY.N) / A_REPLAY_ONE.N
if n < 1 or n > 1000 or n ~= math.floor(n) or not label_ok(label) then
  return bad_args(0, 0, 0, 0, 0, -1, 0, 0, 0, 0)
end
local oids, users, qtys, kinds, ikeys = {}, {}, {}, {}, {}
for i = 1, n do
  local b = A_REPLAY_ONE.N * i + (A_REPLAY.N + 1 - A_REPLAY_ONE.N)
  local oid, u = ARGV[b + A_REPLAY_ONE.oid], ARGV[b + A_REPLAY_ONE.user]
  local q, k = ARGV[b + A_REPLAY_ONE.qty], ARGV[b + A_REPLAY_ONE.kind]
  local key = ARGV[b + A_REPLAY_ONE.idem]
  if not oid_ok(label, oid) or #u > 20 or not string.find(u, '^%d+$')
     or #q > 9 or not string.find(q, '^[1-9]%d*$') or (k ~= 'h' and k ~= 'p' and k ~= 'r')
     or #key > 64 then
    return bad_args(0, 0, 0, 0, 0, -1, 0, 0, 0, 0)
  end
  oids[i], users[i], qtys[i], kinds[i], ikeys[i] = oid, u, tonumber(q), k, key
end
local m = redis.call('HMGET', KEYS[K_REPLAY.meta], M_REPLAY.FIELDS)
local stock = tonumber(redis.call('GET', KEYS[K_REPLAY.stock]) or '')
if not m[M_REPLAY.initial] or not stock then
  return {RC.UNKNOWN_ACTIVITY, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0}
end
if not m[M_REPLAY.fence] then return redis.error_reply('replay: the key set is not fenced') end
local own = tonumber(m[M_REPLAY.initial]) + tonumber(m[M_REPLAY.xin] or '0')
            - tonumber(m[M_REPLAY.xout] or '0')
local limit = tonumber(m[M_REPLAY.limit] or '')
local recs = redis.call('HMGET', KEYS[K_REPLAY.ledger], unpack(oids))
local had = redis.call('HMGET', KEYS[K_REPLAY.buyers], unpack(users))
local ik = {}
for i = 1, n do ik[i] = users[i] .. ':' .. (ikeys[i] ~= '' and ikeys[i] or '-') end
local idem = redis.call('HMGET', KEYS[K_REPLAY.idem], unpack(ik))
local counts, dirty, seen, lw, rel, iw, fresh, refused = {}, {}, {}, {}, {}, {}, {}, {}
local held_n, held_u, rec_n, again_n, over, given = 0, 0, 0, 0, 0, 0
local ref_u, paid_over, idem_n = 0, 0, 0
local stock0 = stock
local function set_count(u, v)
  if counts[u] == nil then dirty[#dirty + 1] = u end
  counts[u] = v
end
for i = 1, n do
  local oid, u, q = oids[i], users[i], qtys[i]
  if not seen[oid] then
    seen[oid] = true
    local cur = counts[u] or tonumber(had[i] or '0')
    local rec = recs[i]
    if kinds[i] ~= 'r' then
      if not rec then
        -- what this Redis's history says against it
        local prev = ikeys[i] ~= '' and (fresh[ik[i]] or idem[i]) or nil
        local pq = prev and string.match(prev, '^[0-9]+:(.*)$')
        local why = (pq and pq ~= oid and 'key') or (limit and cur + q > limit and 'limit')
                    or (stock < q and 'stock') or nil
        if why and kinds[i] == 'h' then
          refused[#refused + 1] = i
          ref_u = ref_u + q
        else
          lw[#lw + 1] = oid
          lw[#lw + 1] = u .. ':' .. q
          set_count(u, cur + q)
          if stock >= q then stock = stock - q else over = over + q - stock; stock = 0 end
          held_n, held_u = held_n + 1, held_u + q
          if why == 'limit' then paid_over = paid_over + 1 end
          if ikeys[i] ~= '' and not prev then
            local v = q .. ':' .. oid
            fresh[ik[i]] = v
            iw[#iw + 1] = ik[i]
            iw[#iw + 1] = v
            idem_n = idem_n + 1
          end
        end
      end
    elseif not rec then
      lw[#lw + 1] = oid
      lw[#lw + 1] = u .. ':' .. q .. ':released'
      rel[#rel + 1] = oid
      rec_n = rec_n + 1
    else
      local ru, rq, mark = string.match(rec, '^([0-9]+):([0-9]+)(.*)$')
      if mark == '' and ru == u and tonumber(rq) == q and cur >= q then
        lw[#lw + 1] = oid
        lw[#lw + 1] = rec .. ':released'
        rel[#rel + 1] = oid
        set_count(u, cur - q)
        local give = q
        if stock + give > own then give = own - stock end
        if give < 0 then give = 0 end
        stock, given, again_n = stock + give, given + give, again_n + 1
      end
    end
  end
end
if #lw > 0 then redis.call('HSET', KEYS[K_REPLAY.ledger], unpack(lw)) end
if #rel > 0 then redis.call('SADD', KEYS[K_REPLAY.released], unpack(rel)) end
if #iw > 0 then redis.call('HSET', KEYS[K_REPLAY.idem], unpack(iw)) end
for j = 1, #dirty do
  local u = dirty[j]
  if counts[u] > 0 then
    redis.call('HSET', KEYS[K_REPLAY.buyers], u, counts[u])
  else
    redis.call('HDEL', KEYS[K_REPLAY.buyers], u)
  end
end
if stock ~= stock0 then redis.call('SET', KEYS[K_REPLAY.stock], stock) end
if over > 0 then redis.call('HINCRBY', KEYS[K_REPLAY.meta], 'oversold', over) end
-- the keys written here must exist from now on (meta `keys`, lib/admit.lua)
local must = tonumber(m[M_REPLAY.keys] or '0') or 0
local add = (#lw > 0 and must % 4 < 2 and 2 or 0) + (#iw > 0 and must % 8 < 4 and 4 or 0)
if add > 0 then redis.call('HSET', KEYS[K_REPLAY.meta], 'keys', must + add) end
if given > 0 then redis.call('HINCRBY', KEYS[K_REPLAY.meta], 'released', given) end
local out = {RC.OK, held_n, held_u, rec_n, again_n, over, stock, #refused, ref_u, paid_over, idem_n}
for j = 1, #refused do out[#out + 1] = refused[j] end
return out
