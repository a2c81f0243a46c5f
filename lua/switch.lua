-- switch.lua - open or close an activity's sale switch.
-- KEYS: meta   ARGV: 1 to open, 0 to close.   Returns {rc}
-- A script, not a bare HSET, so a switch on an activity that was never
-- preheated cannot create a half-written meta hash.
--#include "lib/args.lua"
if ARGV[A_SWITCH.open] ~= '0' and ARGV[A_SWITCH.open] ~= '1' then return bad_args() end
if redis.call('EXISTS', KEYS[K_SWITCH.meta]) == 0 then return {RC.UNKNOWN_ACTIVITY} end
redis.call('HSET', KEYS[K_SWITCH.meta], 'open', ARGV[A_SWITCH.open])
return {RC.OK}
