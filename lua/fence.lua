-- fence.lua - stops every admission of a key set while its live state is
-- rebuilt from the database (docs/recovery.md). The admission scripts,
-- transfer.lua and preheat.lua check meta `fence` and refuse with
-- RECOVERING while it is set.
-- KEYS: meta
-- ARGV: why (rollback | rebuild | manual) text (fence_why, at most 200 bytes)
-- Returns {rc (OK or BAD_ARGUMENT), the fence now in force ('' when refused)}
--
-- A fence already set stays as it is (its reason and time are the first
-- detection's), except that a rebuild takes over the short-lived fence an
-- admission call leaves on vanished keys and makes it permanent. On a key
-- set whose keys are gone this writes a fence-only meta.
--#include "lib/args.lua"
--#include "lib/fence.lua"
local why, text = ARGV[A_FENCE.why] or '', ARGV[A_FENCE.text] or ''
if (why ~= 'rollback' and why ~= 'rebuild' and why ~= 'manual') or #text > 200
   or ARGV[A_FENCE.N + 1] then
  return bad_args('')
end
local cur = redis.call('HGET', KEYS[K_FENCE.meta], 'fence')
if cur and not (cur == 'vanished' and why == 'rebuild') then return {RC.OK, cur} end
fence_set(KEYS[K_FENCE.meta], why, text, {persist = true})
return {RC.OK, why}
