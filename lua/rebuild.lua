-- rebuild.lua - writes the live state of a fenced key set whose keys
-- vanished, from the database's definition (docs/recovery.md): meta, a new
-- epoch, and stock = initial. The replay then puts the orders back
-- (stock = initial - units held), and the resume lifts the fence.
-- KEYS: meta stock
-- ARGV: activity_id initial limit max_qty start_ms end_ms rl_rate rl_burst
--       seg seg_of ('' '' when not a segment)
--       [wr_rate wr_ttl wr_seed] (the waiting room, docs/waiting-room.md; absent
--       or '' '' '' for none: every key set checks passes with the seed, so a
--       rebuilt one must carry it; the queue itself starts empty; a draw
--       gives the seed alone)
--       [store_id] (the rebuilding store's identity: the key set is its
--       own again, docs/design.md "The store's identity"; absent or '' =
--       none)
--       ch (the challenge, lib/challenge.lua; '' = none)
--       reg_start reg_end dr_box control (lib/def.lua fair_of; '0' = none)
-- Returns {rc (PREHEATED; STOCK_LIVE: live stock exists, nothing written;
--          BAD_ARGUMENT), stock}
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/def.lua"
--#include "lib/challenge.lua"
-- ARGV by name: A_REBUILD of src/engine/script_pos.def (C:
-- sk_recovery_rebuild). id .. rl_burst are numbers.
for i = A_REBUILD.id, A_REBUILD.rl_burst do
  if not digits(ARGV[i], 15) then return bad_args(0) end
end
local seg, seg_of = ARGV[A_REBUILD.seg] or '', ARGV[A_REBUILD.seg_of] or ''
local store, ch = ARGV[A_REBUILD.store] or '', ARGV[A_REBUILD.ch] or ''
if (seg == '') ~= (seg_of == '') or (seg ~= '' and not (digits(seg, 4) and digits(seg_of, 4)))
   or not store_id_ok(store) or ARGV[A_REBUILD.N + 1] or (ch ~= '' and not ch_spec_ok(ch)) then
  return bad_args(0)
end
local wr_rate, wr_ttl = ARGV[A_REBUILD.wr_rate] or '', ARGV[A_REBUILD.wr_ttl] or ''
local wr_seed = ARGV[A_REBUILD.wr_seed] or ''
local paced = wr_rate ~= '' or wr_ttl ~= ''
if wr_seed ~= '' and (not string.match(wr_seed, '^[0-9a-f]+$') or #wr_seed > 64
                      or (paced and (not string.match(wr_rate, '^[1-9][0-9]*$') or #wr_rate > 15
                                     or not string.match(wr_ttl, '^[1-9][0-9]*$')
                                     or #wr_ttl > 15)))
   or (wr_seed == '' and paced) then
  return bad_args(0)
end
local fair = fair_of(A_REBUILD.fair)
if not fair then return bad_args(0) end
local d = {id = ARGV[A_REBUILD.id], initial = tonumber(ARGV[A_REBUILD.initial]),
           limit = tonumber(ARGV[A_REBUILD.limit]), max_qty = tonumber(ARGV[A_REBUILD.max_qty]),
           start_ms = tonumber(ARGV[A_REBUILD.start_ms]), end_ms = tonumber(ARGV[A_REBUILD.end_ms]),
           rl_rate = tonumber(ARGV[A_REBUILD.rl_rate]),
           rl_burst = tonumber(ARGV[A_REBUILD.rl_burst]),
           seg = seg, seg_of = seg_of, wr_rate = wr_rate, wr_ttl = wr_ttl, wr_seed = wr_seed,
           ch = ch, fair = fair}
if d.limit < 1 or d.max_qty < 1 or d.end_ms <= d.start_ms then return bad_args(0) end
local live = redis.call('GET', KEYS[K_REBUILD.stock])
if live then return {RC.STOCK_LIVE, tonumber(live)} end
if not redis.call('HGET', KEYS[K_REBUILD.meta], 'fence') then
  return redis.error_reply('rebuild: the key set is not fenced')
end
-- The counts start again, under a new epoch; nothing is deleted from the
-- meta (it holds the fence, and at most what a rebuild wrote before).
local more = {'released', 0, 'oversold', 0, 'adm', 0, 'keys', 0, 'epoch', epoch_now()}
if store ~= '' then more[11] = 'store_id'; more[12] = store end
def_write(KEYS[K_REBUILD.meta], d, more, false)
redis.call('PERSIST', KEYS[K_REBUILD.meta])
redis.call('SET', KEYS[K_REBUILD.stock], d.initial)
return {RC.PREHEATED, d.initial}
