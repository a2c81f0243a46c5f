-- rebuild.lua - writes the live state of a fenced key set whose keys
-- vanished, from the database's definition (docs/recovery.md): meta, a new
-- epoch, and stock = initial. The replay then puts the orders back
-- (stock = initial - units held), and the resume lifts the fence.
-- KEYS: meta stock
-- ARGV: activity_id initial limit max_qty start_ms end_ms rl_rate rl_burst
--       seg seg_of ('' '' when not a segment)
--       [wr_rate wr_ttl wr_seed] (the waiting room, docs/waiting-room.md; absent
--       or '' '' '' for none: every key set checks passes with the seed, so a
--       rebuilt one must carry it; the queue itself starts empty)
--       [store_id] (the rebuilding store's identity: the key set is its
--       own again, docs/design.md "The store's identity"; absent or '' =
--       none)
-- Returns {rc (PREHEATED; STOCK_LIVE: live stock exists, nothing written;
--          BAD_ARGUMENT), stock}
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/def.lua"
for i = 1, 8 do
  if not digits(ARGV[i], 15) then return bad_args(0) end
end
local seg, seg_of = ARGV[9] or '', ARGV[10] or ''
if (seg == '') ~= (seg_of == '') or (seg ~= '' and not (digits(seg, 4) and digits(seg_of, 4)))
   or not store_id_ok(ARGV[14] or '') or ARGV[15] then
  return bad_args(0)
end
local store = ARGV[14] or ''
local wr_rate, wr_ttl, wr_seed = ARGV[11] or '', ARGV[12] or '', ARGV[13] or ''
if wr_seed ~= '' and (not string.match(wr_rate, '^[1-9][0-9]*$') or #wr_rate > 15
                      or not string.match(wr_ttl, '^[1-9][0-9]*$') or #wr_ttl > 15
                      or not string.match(wr_seed, '^[0-9a-f]+$') or #wr_seed > 64)
   or (wr_seed == '' and (wr_rate ~= '' or wr_ttl ~= '')) then
  return bad_args(0)
end
local d = {id = ARGV[1], initial = tonumber(ARGV[2]), limit = tonumber(ARGV[3]),
           max_qty = tonumber(ARGV[4]), start_ms = tonumber(ARGV[5]), end_ms = tonumber(ARGV[6]),
           rl_rate = tonumber(ARGV[7]), rl_burst = tonumber(ARGV[8]), seg = seg, seg_of = seg_of,
           wr_rate = wr_rate, wr_ttl = wr_ttl, wr_seed = wr_seed}
if d.limit < 1 or d.max_qty < 1 or d.end_ms <= d.start_ms then return bad_args(0) end
local live = redis.call('GET', KEYS[2])
if live then return {RC.STOCK_LIVE, tonumber(live)} end
if not redis.call('HGET', KEYS[1], 'fence') then
  return redis.error_reply('rebuild: the key set is not fenced')
end
-- The counts start again, under a new epoch; nothing is deleted from the
-- meta (it holds the fence, and at most what a rebuild wrote before).
local more = {'released', 0, 'oversold', 0, 'adm', 0, 'keys', 0, 'epoch', epoch_now()}
if store ~= '' then more[11] = 'store_id'; more[12] = store end
def_write(KEYS[1], d, more, false)
redis.call('PERSIST', KEYS[1])
redis.call('SET', KEYS[2], d.initial)
return {RC.PREHEATED, d.initial}
