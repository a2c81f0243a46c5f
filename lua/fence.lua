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
local why, text = ARGV[1] or '', ARGV[2] or ''
if (why ~= 'rollback' and why ~= 'rebuild' and why ~= 'manual') or #text > 200 or ARGV[3] then
  return {RC.BAD_ARGUMENT, ''}
end
local cur = redis.call('HGET', KEYS[1], 'fence')
if cur and not (cur == 'vanished' and why == 'rebuild') then return {RC.OK, cur} end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'fence', why, 'fence_ms', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
           'fence_why', text)
redis.call('PERSIST', KEYS[1])
return {RC.OK, why}
