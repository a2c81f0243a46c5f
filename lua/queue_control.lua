-- queue_control.lua - the waiting room's emergency controls
-- (docs/waiting-room.md, "Emergency controls").
-- KEYS: meta q pass held (the base key set), or meta alone for a segment
--       (K_QUEUE_CONTROL, K_SEG_CONTROL of src/engine/script_pos.def)
-- ARGV: action: 'pause' (no new pass: the pace stands still), 'all' (queue
--       everyone: no new pass and no purchase, pass or not), 'nojoin' (no new
--       buyer joins), 'resume' (all of them lifted); or for a segment's meta
--       (one key) 'seg_all' / 'seg_none': its admission's hold
-- Returns {rc (OK, NO_WAITING_ROOM, UNKNOWN_ACTIVITY, BAD_ARGUMENT), the
-- controls after the call (bits: 1 paused, 2 everyone queued, 4 no joins)}
--
-- A pause rebases the count at now (wr_base: what the pace had issued), so
-- it stands still from the pause on and the resume does not hand out the
-- pause's passes at once. While everyone is queued the passes out cannot
-- buy; when that ends, each one's expiry (and its seat's deadline) moves
-- by the time it lasted, so nobody loses a pass to the hold: one HSET and
-- one ZADD per seat held (O(passes out), once).
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/pace.lua"
local act = ARGV[A_QUEUE_CONTROL.action] or ''
if #KEYS == K_SEG_CONTROL.N then
  if act ~= 'seg_all' and act ~= 'seg_none' then return bad_args(0) end
  if redis.call('EXISTS', KEYS[K_SEG_CONTROL.meta]) == 0 then return {RC.UNKNOWN_ACTIVITY, 0} end
  if act == 'seg_all' then
    redis.call('HSET', KEYS[K_SEG_CONTROL.meta], 'wr_hold', 'all')
  else
    redis.call('HDEL', KEYS[K_SEG_CONTROL.meta], 'wr_hold')
  end
  return {RC.OK, act == 'seg_all' and 2 or 0}
end
if #KEYS ~= K_QUEUE_CONTROL.N
   or (act ~= 'pause' and act ~= 'all' and act ~= 'nojoin' and act ~= 'resume') then
  return bad_args(0)
end
local m = redis.call('HMGET', KEYS[K_QUEUE_CONTROL.meta], M_CONTROL.FIELDS)
if not m[M_CONTROL.start_ms] then return {RC.UNKNOWN_ACTIVITY, 0} end
if not m[M_CONTROL.wr_rate] or not m[M_CONTROL.wr_seed] then return {RC.NO_WAITING_ROOM, 0} end
local now = now_ms()
local start, rate = tonumber(m[M_CONTROL.start_ms]), tonumber(m[M_CONTROL.wr_rate])
local hold = wr_on(m[M_CONTROL.wr_hold]) and m[M_CONTROL.wr_hold] or nil

-- The count stands still from now on (already so while held).
local function freeze()
  if hold or now < start then return end
  local base = tonumber(m[M_CONTROL.wr_base] or '') or 0
  local base_ms = tonumber(m[M_CONTROL.wr_base_ms] or '') or start
  local upto = now
  if m[M_CONTROL.fence] then
    upto = math.max(base_ms, math.min(tonumber(m[M_CONTROL.fence_ms] or '') or now, now))
  end
  local issued = pace_at(base, base_ms, rate, upto, redis.call('ZCARD', KEYS[K_QUEUE_CONTROL.wr_q]))
  redis.call('HSET', KEYS[K_QUEUE_CONTROL.meta], 'wr_base', issued, 'wr_base_ms', now)
end

-- Everyone queued ends: the passes out move by the time it lasted.
local function unhold_all()
  if hold ~= 'all' then return end
  local d = now - (tonumber(m[M_CONTROL.wr_all_ms] or '') or now)
  redis.call('HDEL', KEYS[K_QUEUE_CONTROL.meta], 'wr_all_ms')
  if d <= 0 then return end
  local seats = redis.call('ZRANGE', KEYS[K_QUEUE_CONTROL.wr_held], 0, -1, 'WITHSCORES')
  for j = 1, #seats, 2 do
    local u = seats[j]
    redis.call('ZADD', KEYS[K_QUEUE_CONTROL.wr_held],
               string.format('%.0f', tonumber(seats[j + 1]) + d), u)
    local pv = redis.call('HGET', KEYS[K_QUEUE_CONTROL.wr_pass], u)
    if pv and string.find(pv, '^%d+$') then
      redis.call('HSET', KEYS[K_QUEUE_CONTROL.wr_pass], u, string.format('%.0f', tonumber(pv) + d))
    end
  end
end

if act == 'pause' then
  freeze()
  unhold_all()
  redis.call('HSET', KEYS[K_QUEUE_CONTROL.meta], 'wr_hold', 'pause')
elseif act == 'all' then
  freeze()
  if hold ~= 'all' then
    redis.call('HSET', KEYS[K_QUEUE_CONTROL.meta], 'wr_hold', 'all', 'wr_all_ms', now)
  end
elseif act == 'nojoin' then
  redis.call('HSET', KEYS[K_QUEUE_CONTROL.meta], 'wr_nojoin', '1')
else
  unhold_all()
  -- the count goes on from where it stood
  if hold and now >= start then
    redis.call('HSET', KEYS[K_QUEUE_CONTROL.meta], 'wr_base_ms', now)
  end
  redis.call('HDEL', KEYS[K_QUEUE_CONTROL.meta], 'wr_hold', 'wr_nojoin')
end
local h = redis.call('HMGET', KEYS[K_QUEUE_CONTROL.meta], M_HOLD.FIELDS)
return {RC.OK, wr_control_bits(h[M_HOLD.wr_hold], h[M_HOLD.wr_nojoin])}
