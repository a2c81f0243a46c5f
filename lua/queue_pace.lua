-- queue_pace.lua - the figures of an activity's waiting room, and a new pace
-- for it while the sale runs (docs/waiting-room.md).
-- KEYS: meta q (the base key set)
-- ARGV: new passes per second ('' to only read)
-- Returns {rc (OK, NO_WAITING_ROOM, UNKNOWN_ACTIVITY, BAD_ARGUMENT), passes
-- per second (after the call), pass TTL s, queue length, places holding a
-- pass, passes handed out, spent, found expired, ms until the start (0 once
-- started), seats given back to the pace, the emergency controls (bits: 1
-- paused, 2 everyone queued, 4 no new joins)}
--
-- A new pace keeps every pass issued so far: the count is rebased to what
-- it is at now (at the fence, while the key set is fenced; it stands still
-- while paused), and grows at the new pace from there. Before the start
-- only the pace changes.
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/pace.lua"
local new = ARGV[A_QUEUE_PACE.rate] or ''
if new ~= '' and (not string.find(new, '^[1-9]%d*$') or #new > 7 or tonumber(new) > 1000000) then
  return bad_args(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
end
local m = redis.call('HMGET', KEYS[K_QUEUE_PACE.meta], M_PACE.FIELDS)
if not m[M_PACE.start_ms] then return {RC.UNKNOWN_ACTIVITY, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} end
if not m[M_PACE.wr_rate] or not m[M_PACE.wr_seed] then
  return {RC.NO_WAITING_ROOM, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
local now = now_ms()
local start, rate = tonumber(m[M_PACE.start_ms]), tonumber(m[M_PACE.wr_rate])
local len = redis.call('ZCARD', KEYS[K_QUEUE_PACE.wr_q])
local issued = 0
if now >= start then
  local base = tonumber(m[M_PACE.wr_base] or '') or 0
  local base_ms = tonumber(m[M_PACE.wr_base_ms] or '') or start
  -- a fenced key set's pace stands still from the fence on (queue.lua), a
  -- paused one from the last call on
  local upto = now
  if m[M_PACE.fence] then
    upto = math.max(base_ms, math.min(tonumber(m[M_PACE.fence_ms] or '') or now, now))
  end
  if wr_on(m[M_PACE.wr_hold]) then upto = base_ms end
  issued = pace_at(base, base_ms, rate, upto, len)
end
if new ~= '' then
  rate = tonumber(new)
  if now >= start then
    redis.call('HSET', KEYS[K_QUEUE_PACE.meta], 'wr_rate', new, 'wr_base', issued, 'wr_base_ms',
               now)
  else
    redis.call('HSET', KEYS[K_QUEUE_PACE.meta], 'wr_rate', new)
  end
end
return {RC.OK, rate, tonumber(m[M_PACE.wr_ttl] or '') or 0, len, issued,
        tonumber(m[M_PACE.wr_issued] or '') or 0, tonumber(m[M_PACE.wr_spent] or '') or 0,
        tonumber(m[M_PACE.wr_expired] or '') or 0, now < start and start - now or 0,
        tonumber(m[M_PACE.wr_returned] or '') or 0,
        wr_control_bits(m[M_PACE.wr_hold], m[M_PACE.wr_nojoin])}
