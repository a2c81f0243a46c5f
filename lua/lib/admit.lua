-- lib/admit.lua - admission logic shared by purchase.lua and purchase_batch.lua
-- (inlined at build time by tools/gen_scripts.c).
--
-- KEYS[1] meta (hash)  KEYS[2] stock (string)  KEYS[3] buyers (hash user->units)
-- KEYS[4] orders (stream)  KEYS[5] idem (hash "user:key" -> "qty:order_id")
-- KEYS[6] ledger (hash order_id -> "user:qty", ":released" appended on release).
-- One activity, one hash tag, one slot.
--
-- Invariant kept by every script: stock + sum(buyers) == initial.
--
-- Cost matters here (every admission runs this): reads are gathered into
-- one GET, one HMGET of meta and one HMGET of all the buyers; decisions are
-- made in Lua; writes are gathered into one DECRBY and one HSET per hash.
-- Only the XADD is per order. A script is atomic, so reading first and
-- writing last is the same as interleaving.

-- A purchase retried with the same Idempotency-Key gets the first accepted
-- answer back, whatever happened since: returns qty, order id or nil.
-- `fresh` holds answers given earlier in this same call.
local function replay(user, idem, fresh)
  if idem == nil or idem == '' then return nil end
  local k = user .. ':' .. idem
  local prev = fresh[k] or redis.call('HGET', KEYS[5], k)
  if not prev then return nil end
  local sep = string.find(prev, ':', 1, true)
  return tonumber(string.sub(prev, 1, sep - 1)), string.sub(prev, sep + 1)
end

-- Decides n purchases (users[i], qtys[i] strings, idems[i] '' or a key) in
-- order. Returns out = {rc_1, oid_1, qty_1, ...} and the stock after (-1
-- when the call was refused before the stock was read).
local function admit_all(aid, users, qtys, idems, n)
  local out, fresh = {}, {}
  local any_idem = false
  for i = 1, n do
    if idems[i] ~= '' then any_idem = true end
  end
  local stock = redis.call('GET', KEYS[2])
  -- Sold out: answer from the one GET (retries with a key may be replays).
  if stock == '0' and not any_idem then
    for i = 1, n do out[3 * i - 2] = RC.SOLD_OUT; out[3 * i - 1] = ''; out[3 * i] = 0 end
    return out, 0
  end
  local m = redis.call('HMGET', KEYS[1], 'open', 'start_ms', 'end_ms', 'limit', 'max_qty')
  local gate = RC.OK
  if not m[1] or not m[2] or not m[3] or not m[4] or not m[5] or not stock then
    gate = RC.UNKNOWN_ACTIVITY
  elseif m[1] ~= '1' then
    gate = RC.CLOSED
  else
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if now < tonumber(m[2]) then gate = RC.NOT_STARTED
    elseif now >= tonumber(m[3]) then gate = RC.ENDED end
  end
  if gate ~= RC.OK then
    for i = 1, n do
      local pq, poid = replay(users[i], idems[i], fresh)
      if pq then out[3 * i - 2] = RC.OK; out[3 * i - 1] = poid; out[3 * i] = pq
      else out[3 * i - 2] = gate; out[3 * i - 1] = ''; out[3 * i] = 0 end
    end
    return out, -1
  end
  local limit, maxq = tonumber(m[4]), tonumber(m[5])
  stock = tonumber(stock)
  local held = redis.call('HMGET', KEYS[3], unpack(users, 1, n))
  local counts, dirty, ledger, idemw = {}, {}, {}, {}
  local sold = 0
  for i = 1, n do
    local u, qs, k = users[i], qtys[i], idems[i]
    local rc, oid, q = RC.OK, '', 0
    local pq, poid = nil, nil
    if #u > 20 or not string.find(u, '^%d+$') or #k > 64 then
      rc = RC.BAD_ARGUMENT
    elseif k ~= '' then
      pq, poid = replay(u, k, fresh)
    end
    if pq then
      oid, q = poid, pq
    elseif rc == RC.OK then
      q = tonumber(qs)
      if not q or q < 1 or q > maxq or q % 1 ~= 0 then
        rc, q = RC.BAD_QUANTITY, 0
      elseif stock <= 0 then
        rc, q = RC.SOLD_OUT, 0
      elseif stock < q then
        rc, q = RC.INSUFFICIENT, 0
      else
        local had = counts[u] or tonumber(held[i] or '0')
        if had + q > limit then
          rc, q = RC.LIMIT_EXCEEDED, 0
        else
          stock = stock - q
          sold = sold + q
          if not counts[u] then dirty[#dirty + 1] = u end
          counts[u] = had + q
          -- The stream entry id is the order id's unique part: no counter.
          oid = aid .. '-' .. redis.call('XADD', KEYS[4], '*', 'aid', aid, 'uid', u, 'qty', q)
          -- The ledger lets release check the order is real and whose it
          -- is, even after its stream entry was persisted and trimmed.
          ledger[#ledger + 1] = oid
          ledger[#ledger + 1] = u .. ':' .. q
          if k ~= '' then
            local v = q .. ':' .. oid
            fresh[u .. ':' .. k] = v
            idemw[#idemw + 1] = u .. ':' .. k
            idemw[#idemw + 1] = v
          end
        end
      end
    end
    out[3 * i - 2] = rc
    out[3 * i - 1] = oid
    out[3 * i] = q
  end
  if sold > 0 then
    redis.call('DECRBY', KEYS[2], sold)
    local bw = {}
    for j = 1, #dirty do
      bw[2 * j - 1] = dirty[j]
      bw[2 * j] = counts[dirty[j]]
    end
    redis.call('HSET', KEYS[3], unpack(bw))
    redis.call('HSET', KEYS[6], unpack(ledger))
  end
  if #idemw > 0 then redis.call('HSET', KEYS[5], unpack(idemw)) end
  return out, stock
end
