-- order_state.lua - what Redis knows of one order, for a poll that may
-- not need the database (http/order_marks.h): its ledger entry and how far
-- the order worker got in the order's stream. Reads only.
-- KEYS: ledger orders   ARGV: order_id group (the worker's consumer group)
-- Returns {ledger, state, last_delivered_id, pending, oldest_pending_id}:
--   ledger: "user:qty[:released]", or false when the ledger has no entry;
--   state 0: no such stream; 1: no such group (the worker never read the
--   stream: nothing of it is persisted); 2: the group's figures ('' when
--   there is no id).
local led = redis.call('HGET', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then return {led, 0, '', 0, ''} end
local groups = redis.call('XINFO', 'GROUPS', KEYS[2])
for _, g in ipairs(groups) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[2] then
    local p = redis.call('XPENDING', KEYS[2], ARGV[2])
    return {led, 2, f['last-delivered-id'], p[1], p[2] or ''}
  end
end
return {led, 1, '', 0, ''}
