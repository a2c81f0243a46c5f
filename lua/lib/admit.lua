-- lib/admit.lua - admission logic shared by purchase.lua and purchase_batch.lua
-- (inlined at build time by tools/gen_scripts.c).
--
-- KEYS[1] meta (hash)  KEYS[2] stock (string)  KEYS[3] buyers (hash user->units)
-- KEYS[4] orders (stream)  KEYS[5] idem (hash "user:key" -> "qty:order_id")
-- KEYS[6] ledger (hash order_id -> "user:qty", ":released" appended on release).
-- One activity, one hash tag, one slot.
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

-- A purchase retried with the same Idempotency-Key gets the first accepted
-- answer back, whatever happened since (sold out, closed): returns the
-- stored quantity and order id, or nil.
local function replay(user, idem)
  if idem == nil or idem == '' then return nil end
  local prev = redis.call('HGET', KEYS[5], user .. ':' .. idem)
  if not prev then return nil end
  local sep = string.find(prev, ':', 1, true)
  return tonumber(string.sub(prev, 1, sep - 1)), string.sub(prev, sep + 1)
end

-- One purchase against the current stock. Returns rc, order id (or ''),
-- the stock after it, and the quantity admitted (0 when refused). Stock is
-- checked before the buyer's count so a sold-out refusal touches only the
-- keys already read.
local function admit(aid, user, qtys, idem, stock, limit, maxq)
  if type(user) ~= 'string' or #user > 20 or not string.match(user, '^[0-9]+$') then
    return RC.BAD_ARGUMENT, '', stock, 0
  end
  if type(idem) == 'string' and #idem > 64 then return RC.BAD_ARGUMENT, '', stock, 0 end
  local pq, poid = replay(user, idem)
  if pq then return RC.OK, poid, stock, pq end
  if type(qtys) ~= 'string' or #qtys > 9 or not string.match(qtys, '^[0-9]+$') then
    return RC.BAD_QUANTITY, '', stock, 0
  end
  local q = tonumber(qtys)
  if q < 1 or q > maxq then return RC.BAD_QUANTITY, '', stock, 0 end
  if stock <= 0 then return RC.SOLD_OUT, '', stock, 0 end
  if stock < q then return RC.INSUFFICIENT, '', stock, 0 end
  local had = tonumber(redis.call('HGET', KEYS[3], user) or '0')
  if had + q > limit then return RC.LIMIT_EXCEEDED, '', stock, 0 end
  stock = redis.call('DECRBY', KEYS[2], q)
  redis.call('HINCRBY', KEYS[3], user, q)
  -- The stream entry id is the order id's unique part: no extra counter.
  local oid = aid .. '-' .. redis.call('XADD', KEYS[4], '*', 'aid', aid, 'uid', user, 'qty', q)
  -- The ledger lets release check the order is real and whose it is, even
  -- after the stream entry was persisted and trimmed. At most one entry
  -- per unit of stock, so it stays small.
  redis.call('HSET', KEYS[6], oid, user .. ':' .. q)
  if idem and idem ~= '' then redis.call('HSET', KEYS[5], user .. ':' .. idem, q .. ':' .. oid) end
  return RC.OK, oid, stock, q
end

-- A whole-call refusal (closed, not started, ...) still honours replays.
local function refuse_or_replay(rc, user, idem, stock)
  local pq, poid = replay(user, idem)
  if pq and type(user) == 'string' then return RC.OK, poid, stock, pq end
  return rc, '', stock, 0
end
