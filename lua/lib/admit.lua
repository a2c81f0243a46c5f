-- lib/admit.lua - admission logic shared by purchase.lua and purchase_batch.lua
-- (inlined at build time by tools/gen_scripts.c).
--
-- KEYS[1] meta (hash)  KEYS[2] stock (string)  KEYS[3] buyers (hash user->units)
-- KEYS[4] orders (stream).  One activity, one hash tag, one slot.
--
-- Invariant kept by every script: stock + sum(buyers) == initial.

-- Checks that hold for the whole call: switch, time window (Redis TIME, so
-- every client agrees on the clock). Returns RC.OK, now_ms, limit, max_qty,
-- stock; or a refusal code.
local function gate()
  local m = redis.call('HMGET', KEYS[1], 'open', 'start_ms', 'end_ms', 'limit', 'max_qty')
  if not m[1] or not m[2] or not m[3] or not m[4] or not m[5] then
    return RC.UNKNOWN_ACTIVITY
  end
  if m[1] ~= '1' then return RC.CLOSED end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now < tonumber(m[2]) then return RC.NOT_STARTED end
  if now >= tonumber(m[3]) then return RC.ENDED end
  local stock = tonumber(redis.call('GET', KEYS[2]))
  if not stock then return RC.UNKNOWN_ACTIVITY end
  return RC.OK, now, tonumber(m[4]), tonumber(m[5]), stock
end

-- One purchase against the current stock. Returns rc, order id (or ''),
-- and the stock after it. Stock is checked before the buyer's count so a
-- sold-out refusal touches only the keys already read.
local function admit(aid, user, qtys, stock, limit, maxq)
  if type(user) ~= 'string' or #user > 20 or not string.match(user, '^[0-9]+$') then
    return RC.BAD_ARGUMENT, '', stock
  end
  if type(qtys) ~= 'string' or #qtys > 9 or not string.match(qtys, '^[0-9]+$') then
    return RC.BAD_QUANTITY, '', stock
  end
  local q = tonumber(qtys)
  if q < 1 or q > maxq then return RC.BAD_QUANTITY, '', stock end
  if stock <= 0 then return RC.SOLD_OUT, '', stock end
  if stock < q then return RC.INSUFFICIENT, '', stock end
  local had = tonumber(redis.call('HGET', KEYS[3], user) or '0')
  if had + q > limit then return RC.LIMIT_EXCEEDED, '', stock end
  stock = redis.call('DECRBY', KEYS[2], q)
  redis.call('HINCRBY', KEYS[3], user, q)
  -- The stream entry id is the order id's unique part: no extra counter.
  local id = redis.call('XADD', KEYS[4], '*', 'aid', aid, 'uid', user, 'qty', q)
  return RC.OK, aid .. '-' .. id, stock
end
