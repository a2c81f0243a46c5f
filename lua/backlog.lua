-- backlog.lua - how far the order worker is behind on one order stream: what
-- is not yet acknowledged by its group (delivered and pending, or never
-- delivered), and the age of the oldest such entry, on the server's clock
-- (the clock that made the entry ids).
-- KEYS: orders
-- ARGV: group
-- Returns {backlog (-1: unknown), pending, oldest_ms (the ms part of the
--          oldest entry id not acknowledged, 0: none), now_ms (TIME)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0, 0, now} end
local function ms_of(id) return tonumber(string.match(id, '^(%d+)')) end
local group
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[1] then group = f end
end
if not group then
  -- nothing was consumed yet: all of the stream waits
  local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
  return {redis.call('XLEN', KEYS[1]), 0, #first > 0 and ms_of(first[1][1]) or 0, now}
end
local oldest = 0
if group['pending'] > 0 then
  oldest = ms_of(redis.call('XPENDING', KEYS[1], ARGV[1])[2])
end
local nxt = redis.call('XRANGE', KEYS[1], '(' .. group['last-delivered-id'], '+', 'COUNT', 1)
if #nxt > 0 then
  local m = ms_of(nxt[1][1])
  if oldest == 0 or m < oldest then oldest = m end
end
local backlog = (type(group['lag']) == 'number') and (group['pending'] + group['lag']) or -1
return {backlog, group['pending'], oldest, now}
