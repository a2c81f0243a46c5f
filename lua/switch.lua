-- switch.lua - open or close an activity's sale switch.
-- KEYS: meta   ARGV: 1 to open, 0 to close.   Returns {rc}
-- A script, not a bare HSET, so a switch on an activity that was never
-- preheated cannot create a half-written meta hash.
--#include "lib/args.lua"
if ARGV[1] ~= '0' and ARGV[1] ~= '1' then return bad_args() end
if redis.call('EXISTS', KEYS[1]) == 0 then return {RC.UNKNOWN_ACTIVITY} end
redis.call('HSET', KEYS[1], 'open', ARGV[1])
return {RC.OK}
