-- preheat.lua - write an activity's stock, initial stock and meta to Redis.
-- KEYS: meta stock buyers
-- ARGV: activity_id initial limit max_qty start_ms end_ms force(0|1)
--       [rl_rate rl_burst] (the activity's per-user rate limit, requests
--       per second and burst; absent or 0 = none, the global one applies)
--       [seg seg_of] (this key set is segment seg of seg_of, docs/segments.md;
--       '' '' for none)
--       [wr_rate wr_ttl wr_seed] (the waiting room, docs/waiting-room.md:
--       passes per second, a pass's lifetime in s, the draw's seed in hex;
--       absent = none; the queue's own state is left alone)
-- Returns {rc, stock}
--
-- Never overwrites live stock unless forced, and never while the switch is
-- open. A forced preheat keeps what buyers already hold: the new stock is
-- new_initial - held, refused if that would be negative.
for i = 1, 7 do
  if not string.match(ARGV[i] or '', '^[0-9]+$') or #ARGV[i] > 15 then return {RC.BAD_ARGUMENT, 0} end
end
for i = 8, 13 do
  if ARGV[i] and ARGV[i] ~= '' and (not string.match(ARGV[i], '^[0-9]+$') or #ARGV[i] > 15) then
    return {RC.BAD_ARGUMENT, 0}
  end
end
local wr_seed = ARGV[14] or ''
if wr_seed ~= '' and (not string.match(wr_seed, '^[0-9a-f]+$') or #wr_seed > 64
                      or (tonumber(ARGV[12] or '') or 0) < 1 or (tonumber(ARGV[13] or '') or 0) < 1) then
  return {RC.BAD_ARGUMENT, 0}
end
local rl_rate, rl_burst = tonumber(ARGV[8] or '') or 0, tonumber(ARGV[9] or '') or 0
local initial, limit, maxq = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local s, e, force = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7] == '1'
if limit < 1 or maxq < 1 or e <= s then return {RC.BAD_ARGUMENT, 0} end
local live = redis.call('GET', KEYS[2])
local stock = initial
if live then
  if not force then return {RC.STOCK_LIVE, tonumber(live)} end
  if redis.call('HGET', KEYS[1], 'open') == '1' then return {RC.IS_OPEN, tonumber(live)} end
  local held = 0
  local b = redis.call('HVALS', KEYS[3])
  for i = 1, #b do held = held + tonumber(b[i]) end
  stock = initial - held
  if stock < 0 then return {RC.BELOW_SOLD, tonumber(live)} end
end
redis.call('SET', KEYS[2], stock)
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'initial', initial, 'limit', limit, 'max_qty', maxq,
           'start_ms', s, 'end_ms', e, 'open', '0')
redis.call('HSETNX', KEYS[1], 'released', 0)
-- A segment's own stock is initial + xin - xout - held; a preheat restarts
-- that count (the forced stock above is initial - held).
if (ARGV[10] or '') ~= '' and (ARGV[11] or '') ~= '' then
  redis.call('HSET', KEYS[1], 'seg', ARGV[10], 'seg_of', ARGV[11], 'xin', 0, 'xout', 0)
end
-- The waiting room: every key set carries the seed (the admission call checks
-- passes with it); the queue itself is the base key set's.
if wr_seed ~= '' then
  redis.call('HSET', KEYS[1], 'wr_rate', ARGV[12], 'wr_ttl', ARGV[13], 'wr_seed', wr_seed)
else
  redis.call('HDEL', KEYS[1], 'wr_rate', 'wr_ttl', 'wr_seed')
end
-- The activity's rate limit rides in meta, read by the admission call.
if rl_rate > 0 then
  redis.call('HSET', KEYS[1], 'rl_rate', rl_rate, 'rl_burst', rl_burst > 0 and rl_burst or rl_rate)
else
  redis.call('HDEL', KEYS[1], 'rl_rate', 'rl_burst')
end
return {RC.PREHEATED, stock}
