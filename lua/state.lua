-- state.lua - one consistent snapshot of an activity's live state.
-- KEYS: meta stock buyers orders
-- Returns {exists, open, initial, stock, released, limit, max_qty, start_ms,
--          end_ms, buyers, held, stream_len}
local m = redis.call('HMGET', KEYS[1], 'open', 'initial', 'released', 'limit', 'max_qty',
                     'start_ms', 'end_ms')
local stock = redis.call('GET', KEYS[2])
if not m[2] or not stock then return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} end
local held = 0
local b = redis.call('HVALS', KEYS[3])
for i = 1, #b do held = held + tonumber(b[i]) end
return {1, m[1] == '1' and 1 or 0, tonumber(m[2]), tonumber(stock), tonumber(m[3] or '0'),
        tonumber(m[4]), tonumber(m[5]), tonumber(m[6]), tonumber(m[7]), #b, held,
        redis.call('XLEN', KEYS[4])}
