-- lib/pace.lua - the waiting room's pace (docs/waiting-room.md), shared by
-- queue.lua (joins and polls), queue_pace.lua (figures, a new pace) and
-- queue_control.lua (the emergency controls).
--
-- The first `issued` places of the queue hold a pass:
--   issued = min(queue length, base + floor((now - base_ms) * rate / 1000))
-- with base and base_ms in meta (wr_base, wr_base_ms; at first 0 and the
-- start). A seat given back (a pass unused within its TTL) adds one to
-- base. While the count stands still (a fence, a pause) base_ms follows now.

-- Places holding a pass at upto (ms), never more than len.
local function pace_at(base, base_ms, rate, upto, len)
  local a = base + math.floor((upto - base_ms) * rate / 1000)
  if a > len then a = len end
  return a
end

-- The waiting room's emergency controls as bits (1 pause, 2 queue everyone,
-- 4 no new joins), from meta wr_hold and wr_nojoin (absent or '': off).
local function wr_control_bits(hold, nojoin)
  local b = 0
  if hold == 'pause' then b = 1 elseif hold == 'all' then b = 2 end
  if nojoin and nojoin ~= '' then b = b + 4 end
  return b
end

-- A meta field of the controls that is set (absent, false or '': not).
local function wr_on(v)
  return v and v ~= '' and true or false
end
