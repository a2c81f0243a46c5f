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
-- Returns {rc, stock}
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
for i = 1, 7 do
  if not string.match(ARGV[i] or '', '^[0-9]+$') or #ARGV[i] > 15 then return {RC.BAD_ARGUMENT, 0} end
end
for i = 8, 14 do
  if ARGV[i] and ARGV[i] ~= '' and (not string.match(ARGV[i], '^[0-9]+$') or #ARGV[i] > 15) then
    return {RC.BAD_ARGUMENT, 0}
  end
end
local function opt(i) return tonumber(ARGV[i] ~= nil and ARGV[i] ~= '' and ARGV[i] or '0') end
local seg, seg_of = ARGV[10] or '', ARGV[11] or ''
if (seg == '') ~= (seg_of == '') then return {RC.BAD_ARGUMENT, 0} end
local rl_rate, rl_burst, db_held = opt(8), opt(9), opt(12)
local wr_seed = ARGV[15] or ''
if wr_seed ~= '' and (not string.match(wr_seed, '^[0-9a-f]+$') or #wr_seed > 64
                      or opt(13) < 1 or opt(14) < 1) then
  return {RC.BAD_ARGUMENT, 0}
end
local initial, limit, maxq = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local s, e, force = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7] == '1'
if limit < 1 or maxq < 1 or e <= s then return {RC.BAD_ARGUMENT, 0} end
local live = redis.call('GET', KEYS[2])
if redis.call('HGET', KEYS[1], 'fence') then return {RC.RECOVERING, tonumber(live or '0')} end
if not live and db_held > 0 then return {RC.RECOVERING, 0} end
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
-- The incarnation of the key set (docs/recovery.md): a forced preheat keeps
-- it, only a delete and a new preheat (or a rebuild) make a new one.
local t = redis.call('TIME')
redis.call('HSETNX', KEYS[1], 'epoch', t[1] .. string.format('%06d', tonumber(t[2])))
-- A segment's own stock is initial + xin - xout - held; a preheat restarts
-- that count (the forced stock above is initial - held).
if seg ~= '' then
  redis.call('HSET', KEYS[1], 'seg', seg, 'seg_of', seg_of, 'xin', 0, 'xout', 0)
end
-- The waiting room: every key set carries the seed (the admission call checks
-- passes with it); the queue itself is the base key set's.
if wr_seed ~= '' then
  redis.call('HSET', KEYS[1], 'wr_rate', ARGV[13], 'wr_ttl', ARGV[14], 'wr_seed', wr_seed)
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
