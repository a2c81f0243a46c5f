-- queue_spent.lua - marks a buyer's pass spent in the waiting room's own
-- record (docs/waiting-room.md), after a purchase with it was admitted, so
-- the buyer's next poll says "used", and frees its seat (the pace's next
-- pass fills it; an unspent one would go back to the pace at its
-- deadline). The admission call's record in the key set that admitted it
-- (wr:spent) is what refuses a second purchase; this one is for the buyer,
-- the seats and the figures.
-- KEYS: meta pass held (the base key set)
-- ARGV: user_id, the pass's expiry (unix ms)
-- Returns {1 marked now, 0 not the pass handed out (or marked before)}, or
-- for a malformed call {BAD_ARGUMENT} (lib/args.lua): nothing marked.
--#include "lib/args.lua"
local u, e = ARGV[A_QUEUE_SPENT.user] or '', ARGV[A_QUEUE_SPENT.exp] or ''
if not digits(u, 20) or not digits(e, 20) then return bad_args() end
if redis.call('HGET', KEYS[K_QUEUE_SPENT.wr_pass], u) ~= e then return {0} end
redis.call('HSET', KEYS[K_QUEUE_SPENT.wr_pass], u, 's' .. e)
redis.call('ZREM', KEYS[K_QUEUE_SPENT.wr_held], u)
redis.call('HINCRBY', KEYS[K_QUEUE_SPENT.meta], 'wr_spent', 1)
return {1}
