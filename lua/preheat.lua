-- preheat.lua - write an activity's stock, initial stock and meta to Redis.
-- KEYS: meta stock buyers
-- ARGV: activity_id initial limit max_qty start_ms end_ms force(0|1)
-- Returns {rc, stock}
--
-- Never overwrites live stock unless forced, and never while the switch is
-- open. A forced preheat keeps what buyers already hold: the new stock is
-- new_initial - held, refused if that would be negative.
for i = 1, 7 do
  if not string.match(ARGV[i] or '', '^[0-9]+$') or #ARGV[i] > 15 then return {RC.BAD_ARGUMENT, 0} end
end
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
return {RC.PREHEATED, stock}
