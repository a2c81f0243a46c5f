-- peek.lua - what a buyer sees of an activity's (or one segment's) live
-- state, in O(1): the state script sums the buyers hash, which grows with
-- the sale, and GET /activities/{id} is the route buyers poll.
-- KEYS: meta stock
-- Returns {exists, open, stock}
-- flags: no-writes
local stock = redis.call('GET', KEYS[K_PEEK.stock])
local m = redis.call('HMGET', KEYS[K_PEEK.meta], M_PEEK.FIELDS)
if not stock or not m[M_PEEK.initial] then return {0, 0, 0} end
return {1, m[M_PEEK.open] == '1' and 1 or 0, tonumber(stock)}
