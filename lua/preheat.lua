-- preheat.lua - write an activity's stock, initial stock and meta to Redis.
-- KEYS: meta stock buyers
-- ARGV: activity_id initial limit max_qty start_ms end_ms force(0|1)
--       [rl_rate rl_burst] (the activity's per-user rate limit, requests
--       per second and burst; absent or 0 = none, the global one applies)
--       [seg seg_of] (this key set is segment seg of seg_of, docs/segments.md;
--       '' '' for none) [db_held] (units the database holds in orders not
--       cancelled; '' or 0 for none)
--       [wr_rate wr_ttl wr_seed] (the waiting room, docs/waiting-room.md:
--       passes per second, a pass's lifetime in s, the draw's seed in hex;
--       absent or '' = none; the queue's own state is left alone)
--       [store_id] (the preheating store's identity, 16 hex digits; absent
--       or '' = none: docs/design.md, "The store's identity")
-- Returns {rc, stock}
--
-- The key set belongs to the store whose identity its meta holds
-- (`store_id`): a preheat from another store is refused OTHER_STORE,
-- forced or not, and changes nothing. One preheated before identities
-- existed takes the preheater's, live stock or not.
--
-- Never overwrites live stock unless forced, and never while the switch is
-- open. A forced preheat keeps what buyers already hold: the new stock is
-- new_initial - held, refused if that would be negative.
--
-- Never writes a key set whose live state is being rebuilt (meta `fence`,
-- docs/recovery.md), and never writes fresh stock where the database holds
-- orders (db_held > 0: Redis lost the activity's keys): both answer
-- RECOVERING, and the stock is rebuilt from the orders instead
-- (`seckill activity recover`, or the order worker on its own).
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/def.lua"
for i = 1, 7 do
  if not digits(ARGV[i], 15) then return bad_args(0) end
end
for i = 8, 14 do
  if ARGV[i] and ARGV[i] ~= '' and not digits(ARGV[i], 15) then return bad_args(0) end
end
local function opt(i) return tonumber(ARGV[i] ~= nil and ARGV[i] ~= '' and ARGV[i] or '0') end
local seg, seg_of = ARGV[10] or '', ARGV[11] or ''
if (seg == '') ~= (seg_of == '') then return bad_args(0) end
local db_held = opt(12)
local wr_seed = ARGV[15] or ''
local store = ARGV[16] or ''
if not store_id_ok(store) then return bad_args(0) end
if wr_seed ~= '' and (not string.match(wr_seed, '^[0-9a-f]+$') or #wr_seed > 64
                      or opt(13) < 1 or opt(14) < 1) then
  return bad_args(0)
end
local d = {id = ARGV[1], initial = tonumber(ARGV[2]), limit = tonumber(ARGV[3]),
           max_qty = tonumber(ARGV[4]), start_ms = tonumber(ARGV[5]), end_ms = tonumber(ARGV[6]),
           seg = seg, seg_of = seg_of, rl_rate = opt(8), rl_burst = opt(9),
           wr_rate = ARGV[13], wr_ttl = ARGV[14], wr_seed = wr_seed}
local force = ARGV[7] == '1'
if d.limit < 1 or d.max_qty < 1 or d.end_ms <= d.start_ms then return bad_args(0) end
local live = redis.call('GET', KEYS[2])
local owner = redis.call('HGET', KEYS[1], 'store_id')
if store ~= '' and owner and owner ~= store then return {RC.OTHER_STORE, tonumber(live or '0')} end
if redis.call('HGET', KEYS[1], 'fence') then return {RC.RECOVERING, tonumber(live or '0')} end
if not live and db_held > 0 then return {RC.RECOVERING, 0} end
local stock = d.initial
if live then
  if store ~= '' then redis.call('HSETNX', KEYS[1], 'store_id', store) end
  if not force then return {RC.STOCK_LIVE, tonumber(live)} end
  if redis.call('HGET', KEYS[1], 'open') == '1' then return {RC.IS_OPEN, tonumber(live)} end
  local held = 0
  local b = redis.call('HVALS', KEYS[3])
  for i = 1, #b do held = held + tonumber(b[i]) end
  stock = d.initial - held
  if stock < 0 then return {RC.BELOW_SOLD, tonumber(live)} end
end
redis.call('SET', KEYS[2], stock)
-- The definition, over an earlier one (forced): its rate limit and waiting
-- room go when this one has none (the queue's own state is left alone). A
-- segment's own stock is initial + xin - xout - held; a preheat restarts
-- that count (the forced stock above is initial - held). Every key set of
-- a waiting room carries its seed (the admission call checks passes with
-- it); the activity's rate limit rides in meta, read by the admission call.
def_write(KEYS[1], d, store ~= '' and {'store_id', store} or nil, true)
redis.call('HSETNX', KEYS[1], 'released', 0)
-- The incarnation of the key set (docs/recovery.md): a forced preheat keeps
-- it, only a delete and a new preheat (or a rebuild) make a new one.
redis.call('HSETNX', KEYS[1], 'epoch', epoch_now())
return {RC.PREHEATED, stock}
