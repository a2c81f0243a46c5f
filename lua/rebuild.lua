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
-- Returns {rc (PREHEATED; STOCK_LIVE: live stock exists, nothing written;
--          BAD_ARGUMENT), stock}
for i = 1, 8 do
  if not string.match(ARGV[i] or '', '^[0-9]+$') or #ARGV[i] > 15 then return {RC.BAD_ARGUMENT, 0} end
end
local seg, seg_of = ARGV[9] or '', ARGV[10] or ''
if (seg == '') ~= (seg_of == '') or (seg ~= '' and not (string.match(seg, '^[0-9]+$')
   and string.match(seg_of, '^[0-9]+$'))) or #seg > 4 or #seg_of > 4 or ARGV[14] then
  return {RC.BAD_ARGUMENT, 0}
end
local wr_rate, wr_ttl, wr_seed = ARGV[11] or '', ARGV[12] or '', ARGV[13] or ''
if wr_seed ~= '' and (not string.match(wr_rate, '^[1-9][0-9]*$') or #wr_rate > 15
                      or not string.match(wr_ttl, '^[1-9][0-9]*$') or #wr_ttl > 15
                      or not string.match(wr_seed, '^[0-9a-f]+$') or #wr_seed > 64)
   or (wr_seed == '' and (wr_rate ~= '' or wr_ttl ~= '')) then
  return {RC.BAD_ARGUMENT, 0}
end
local initial, limit, maxq = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local s, e, rl_rate, rl_burst = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
if limit < 1 or maxq < 1 or e <= s then return {RC.BAD_ARGUMENT, 0} end
local live = redis.call('GET', KEYS[2])
if live then return {RC.STOCK_LIVE, tonumber(live)} end
if not redis.call('HGET', KEYS[1], 'fence') then
  return redis.error_reply('rebuild: the key set is not fenced')
end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'initial', initial, 'limit', limit, 'max_qty', maxq,
           'start_ms', s, 'end_ms', e, 'open', '0', 'released', 0, 'oversold', 0, 'adm', 0,
           'epoch', t[1] .. string.format('%06d', tonumber(t[2])))
if seg ~= '' then
  redis.call('HSET', KEYS[1], 'seg', seg, 'seg_of', seg_of, 'xin', 0, 'xout', 0)
end
if rl_rate > 0 then
  redis.call('HSET', KEYS[1], 'rl_rate', rl_rate, 'rl_burst', rl_burst > 0 and rl_burst or rl_rate)
end
if wr_seed ~= '' then
  redis.call('HSET', KEYS[1], 'wr_rate', wr_rate, 'wr_ttl', wr_ttl, 'wr_seed', wr_seed)
end
redis.call('PERSIST', KEYS[1])
redis.call('SET', KEYS[2], initial)
return {RC.PREHEATED, initial}
