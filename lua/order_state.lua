-- order_state.lua - what Redis knows of one order, for a poll that may
-- not need the database (http/order_marks.h): its ledger entry, whether
-- this stream holds the order's entry, and how far the order worker got in
-- the stream. Reads only.
-- KEYS: ledger orders
-- ARGV: order_id group (the worker's consumer group) entry ("<ms>-<seq>",
--       from the order id) branch (the order id's, '' for none) index (the
--       order's place in an entry of several, from the order id; '' for an
--       order alone in its entry)
-- Returns {ledger, state, last_delivered_id, pending, oldest_pending_id,
--          here}:
--   ledger: "user:qty[:released]", or false when the ledger has no entry;
--   state 0: no such stream; 1: no such group (the worker never read the
--   stream: nothing of it is persisted); 2: the group's figures ('' when
--   there is no id);
--   here: 1 when the stream holds the entry and it is this order's (its
--   branch field is the id's, and it holds several orders, index among
--   them, exactly when the id has an index): an order put back from the database after a
--   rebuild has a ledger entry but no stream entry (or, after a split,
--   another branch's at the same id), and only the database knows it.
-- flags: no-writes
local led = redis.call('HGET', KEYS[K_ORDER_STATE.ledger], ARGV[A_ORDER_STATE.oid])
if redis.call('EXISTS', KEYS[K_ORDER_STATE.orders]) == 0 then return {led, 0, '', 0, '', 0} end
local here = 0
local entry = ARGV[A_ORDER_STATE.entry]
local e = redis.call('XRANGE', KEYS[K_ORDER_STATE.orders], entry, entry)
if e[1] then
  local b, c = '', nil
  local f = e[1][2]
  for i = 1, #f, 2 do
    if f[i] == 'b' then b = f[i + 1] elseif f[i] == 'c' then c = tonumber(f[i + 1]) end
  end
  local at = ARGV[A_ORDER_STATE.index] ~= '' and tonumber(ARGV[A_ORDER_STATE.index]) or nil
  if b == ARGV[A_ORDER_STATE.branch] and (at == nil) == (c == nil) and (at == nil or at < c) then
    here = 1
  end
end
local groups = redis.call('XINFO', 'GROUPS', KEYS[K_ORDER_STATE.orders])
for _, g in ipairs(groups) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[A_ORDER_STATE.group] then
    local p = redis.call('XPENDING', KEYS[K_ORDER_STATE.orders], ARGV[A_ORDER_STATE.group])
    return {led, 2, f['last-delivered-id'], p[1], p[2] or '', here}
  end
end
return {led, 1, '', 0, '', here}
