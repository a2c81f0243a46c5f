-- lib/backlog.lua - what the order worker's group has not acknowledged on
-- one stream, shared by state.lua and backlog.lua (inlined at build time).
--
-- The group's `lag` (entries added - entries read) is not to be trusted
-- alone: Redis 7.0 does not replicate the group's entries-read counter, so
-- a promoted replica (or a restarted node) reports a lag of entries the old
-- master had long delivered. What is undelivered is what lies after the
-- last-delivered id: counted up to BACKLOG_EXACT entries (a bounded
-- XRANGE), the lag (capped at the stream's length) beyond that.
local BACKLOG_EXACT = 100

local function backlog_ms_of(id)
  return tonumber(string.match(id, '^(%d+)'))
end

-- {entries (-1 unknown), pending, oldest_ms (0: none)} of group on stream.
local function backlog_of(stream, group)
  if redis.call('EXISTS', stream) == 0 then return {0, 0, 0} end
  local g
  for _, x in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local f = {}
    for i = 1, #x, 2 do f[x[i]] = x[i + 1] end
    if f['name'] == group then g = f end
  end
  if not g then
    -- nothing was consumed yet: all of the stream waits
    local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
    return {redis.call('XLEN', stream), 0, #first > 0 and backlog_ms_of(first[1][1]) or 0}
  end
  local oldest = 0
  if g['pending'] > 0 then
    oldest = backlog_ms_of(redis.call('XPENDING', stream, group)[2])
  end
  local after = redis.call('XRANGE', stream, '(' .. g['last-delivered-id'], '+', 'COUNT',
                           BACKLOG_EXACT + 1)
  local undelivered = #after
  if #after > 0 then
    local m = backlog_ms_of(after[1][1])
    if oldest == 0 or m < oldest then oldest = m end
  end
  if #after > BACKLOG_EXACT then
    local lag, xlen = g['lag'], redis.call('XLEN', stream)
    undelivered = (type(lag) == 'number' and lag > undelivered) and math.min(lag, xlen) or -1
    if undelivered < 0 then return {-1, g['pending'], oldest} end
  end
  return {g['pending'] + undelivered, g['pending'], oldest}
end
