-- preheat.lua - write an activity's stock, initial stock and meta to Redis.
-- KEYS: meta stock buyers orders
-- ARGV: activity_id initial limit max_qty start_ms end_ms force(0|1)
--       [rl_rate rl_burst] (the activity's per-user rate limit, requests
--       per second and burst; absent or 0 = none, the global one applies)
--       [seg seg_of] (this key set is segment seg of seg_of, docs/segments.md;
--       '' '' for none) [db_held] (units the database holds in orders not
--       cancelled; '' or 0 for none)
--       [wr_rate wr_ttl wr_seed] (the waiting room, docs/waiting-room.md:
--       passes per second, a pass's lifetime in s, the draw's seed in hex;
--       absent or '' = none; the queue's own state is left alone; a draw
--       gives the seed alone, its passes' key)
--       [store_id] (the preheating store's identity, 16 hex digits; absent
--       or '' = none: docs/design.md, "The store's identity")
--       [ch] (the challenge, "<min bits>:<captcha 0|1>", lib/challenge.lua;
--       absent or '' = none: docs/challenges.md)
--       [reg_start reg_end dr_box control] (lib/def.lua fair_of: the
--       pre-registration window, a draw winner's box, the waiting room's
--       emergency controls; '0' or absent = none)
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
--#include "lib/challenge.lua"
-- ARGV by name: A_PREHEAT of src/engine/script_pos.def (C:
-- sk_stock_preheat_args). id .. force and rl_rate .. wr_ttl are numbers.
for i = A_PREHEAT.id, A_PREHEAT.force do
  if not digits(ARGV[i], 15) then return bad_args(0) end
end
for i = A_PREHEAT.rl_rate, A_PREHEAT.wr_ttl do
  if ARGV[i] and ARGV[i] ~= '' and not digits(ARGV[i], 15) then return bad_args(0) end
end
local function opt(i) return tonumber(ARGV[i] ~= nil and ARGV[i] ~= '' and ARGV[i] or '0') end
local seg, seg_of = ARGV[A_PREHEAT.seg] or '', ARGV[A_PREHEAT.seg_of] or ''
if (seg == '') ~= (seg_of == '') then return bad_args(0) end
local db_held = opt(A_PREHEAT.db_held)
local wr_seed = ARGV[A_PREHEAT.wr_seed] or ''
local store = ARGV[A_PREHEAT.store] or ''
if not store_id_ok(store) then return bad_args(0) end
local wr_rate, wr_ttl = opt(A_PREHEAT.wr_rate), opt(A_PREHEAT.wr_ttl)
if wr_seed ~= '' and (not string.match(wr_seed, '^[0-9a-f]+$') or #wr_seed > 64
                      or (wr_rate < 1) ~= (wr_ttl < 1)) then
  return bad_args(0)
end
local ch = ARGV[A_PREHEAT.ch] or ''
if ch ~= '' and not ch_spec_ok(ch) then return bad_args(0) end
local fair = fair_of(A_PREHEAT.fair)
if not fair then return bad_args(0) end
local d = {id = ARGV[A_PREHEAT.id], initial = tonumber(ARGV[A_PREHEAT.initial]),
           limit = tonumber(ARGV[A_PREHEAT.limit]), max_qty = tonumber(ARGV[A_PREHEAT.max_qty]),
           start_ms = tonumber(ARGV[A_PREHEAT.start_ms]), end_ms = tonumber(ARGV[A_PREHEAT.end_ms]),
           seg = seg, seg_of = seg_of, rl_rate = opt(A_PREHEAT.rl_rate),
           rl_burst = opt(A_PREHEAT.rl_burst),
           wr_rate = wr_rate > 0 and ARGV[A_PREHEAT.wr_rate] or '',
           wr_ttl = ARGV[A_PREHEAT.wr_ttl], wr_seed = wr_seed, ch = ch, fair = fair}
local force = ARGV[A_PREHEAT.force] == '1'
if d.limit < 1 or d.max_qty < 1 or d.end_ms <= d.start_ms then return bad_args(0) end
local live = redis.call('GET', KEYS[K_PREHEAT.stock])
local owner = redis.call('HGET', KEYS[K_PREHEAT.meta], 'store_id')
if store ~= '' and owner and owner ~= store then return {RC.OTHER_STORE, tonumber(live or '0')} end
if redis.call('HGET', KEYS[K_PREHEAT.meta], 'fence') then
  return {RC.RECOVERING, tonumber(live or '0')}
end
if not live and db_held > 0 then return {RC.RECOVERING, 0} end
local stock = d.initial
if live then
  if store ~= '' then redis.call('HSETNX', KEYS[K_PREHEAT.meta], 'store_id', store) end
  if not force then return {RC.STOCK_LIVE, tonumber(live)} end
  if redis.call('HGET', KEYS[K_PREHEAT.meta], 'open') == '1' then
    return {RC.IS_OPEN, tonumber(live)}
  end
  local held = 0
  local b = redis.call('HVALS', KEYS[K_PREHEAT.buyers])
  for i = 1, #b do held = held + tonumber(b[i]) end
  stock = d.initial - held
  if stock < 0 then return {RC.BELOW_SOLD, tonumber(live)} end
end
redis.call('SET', KEYS[K_PREHEAT.stock], stock)
-- The order worker's group exists before the first order. Redis at
-- maxmemory refuses XGROUP CREATE (-OOM) even where it would free memory:
-- a worker that first met the stream after the buyers filled Redis could
-- never read it, and nothing would give the memory back. Id 0 as the
-- worker's own CREATE; an existing group stays as it is (BUSYGROUP).
redis.pcall('XGROUP', 'CREATE', KEYS[K_PREHEAT.orders], NAME.WORKER_GROUP, '0', 'MKSTREAM')
-- The definition, over an earlier one (forced): its rate limit and waiting
-- room go when this one has none (the queue's own state is left alone). A
-- segment's own stock is initial + xin - xout - held; a preheat restarts
-- that count (the forced stock above is initial - held). Every key set of
-- a waiting room carries its seed (the admission call checks passes with
-- it); the activity's rate limit rides in meta, read by the admission call.
def_write(KEYS[K_PREHEAT.meta], d, store ~= '' and {'store_id', store} or nil, true)
redis.call('HSETNX', KEYS[K_PREHEAT.meta], 'released', 0)
-- The incarnation of the key set (docs/recovery.md): a forced preheat keeps
-- it, only a delete and a new preheat (or a rebuild) make a new one.
redis.call('HSETNX', KEYS[K_PREHEAT.meta], 'epoch', epoch_now())
return {RC.PREHEATED, stock}
