-- lib/admit.lua - admission logic shared by purchase.lua and purchase_batch.lua
-- (inlined at build time by tools/gen_scripts.c).
--
-- KEYS[1] meta (hash)  KEYS[2] stock (string)  KEYS[3] buyers (hash user->units)
-- KEYS[4] orders (stream)  KEYS[5] idem (hash "user:key" -> "qty:order_id")
-- KEYS[6] ledger (hash order_id -> "user:qty", ":released" appended on release).
-- KEYS[7] xin (hash transfer id -> units received; segments only).
-- One activity (or one segment of it), one hash tag, one slot.
--
-- Rollback guard (docs/recovery.md): meta holds `epoch` (the key set's
-- incarnation) and `adm` (orders ever admitted here; each stream entry
-- carries its number as field `n`). A caller passes the (epoch, adm) it
-- saw last; the same epoch with a smaller adm means Redis went back in
-- time, and the call fences the key set (meta `fence`) before it sells
-- anything. While `fence` is set every purchase is refused RECOVERING.
--
-- Invariant kept by every script: stock + sum(buyers) == initial, or for a
-- segment (docs/segments.md) stock + sum(buyers) == initial + xin - xout.
--
-- Cost matters here (every admission runs this): reads are gathered into
-- one GET, one HMGET of meta and one HMGET of all the buyers; decisions are
-- made in Lua; writes are gathered into one DECRBY and one HSET per hash.
-- Only the XADD is per order. A script is atomic, so reading first and
-- writing last is the same as interleaving.

-- Rate limiting (docs/rate-limit.md): GCRA, one key per user and one per
-- client IP, named from the activity's prefix so they share its hash tag:
-- sk:{a<ID>}:rl:u:<user>, sk:{a<ID>}:rl:ip:<ip>. A key holds the
-- theoretical arrival time (TAT, unix microseconds) and expires when the
-- bucket is full again, so idle limiters cost no memory; stock keys never
-- expire. Cost: nothing when off; a GET and, when allowed, a SET PX per
-- limiter and purchase when on.
local RL_PREFIX = string.sub(KEYS[1], 1, -5) .. 'rl:' -- KEYS[1] is sk:{a<ID>}:meta
local RL_SLACK_US = 5000
--#include "lib/pass.lua"

-- One GCRA check of key at now_us (period_us between requests, burst
-- requests at once). Returns 0 and the new TAT when allowed, or the wait
-- in ms until a request would be allowed. Writes nothing: both limiters
-- are checked before either is charged, so a refusal costs no token.
local function gcra(key, now_us, period_us, burst)
  local tat = tonumber(redis.call('GET', key) or '0') or 0
  if tat < now_us then tat = now_us end
  local new_tat = tat + period_us
  local allow_at = new_tat - burst * period_us
  -- Slack: a client that waits exactly the advertised time, timed by its
  -- own clock, is let in although Redis's wall clock (TIME) may run a
  -- little slower (NTP slews it by up to 0.05%): up to 5 ms, never more
  -- than a quarter of a token.
  local slack = period_us / 4
  if slack > RL_SLACK_US then slack = RL_SLACK_US end
  if now_us + slack < allow_at then
    local wait = math.ceil((allow_at - now_us) / 1000)
    if wait < 1 then wait = 1 end
    return wait, 0
  end
  return 0, new_tat
end

-- Charges an allowed request: the key lives until the bucket is full again.
local function gcra_set(key, now_us, new_tat)
  -- %.0f: tostring would print 1.7e+15 and lose the microseconds
  redis.call('SET', key, string.format('%.0f', new_tat), 'PX',
             math.ceil((new_tat - now_us) / 1000) + 1)
end

-- Rate per second and burst as numbers, or nil when that limiter is off.
local function rl_params(rate, burst)
  rate, burst = tonumber(rate or ''), tonumber(burst or '')
  if not rate or rate <= 0 then return nil end
  if not burst or burst < 1 then burst = rate end
  if burst < 1 then burst = 1 end
  return 1000000 / rate, burst
end

-- A purchase retried with the same Idempotency-Key gets the first accepted
-- answer back, whatever happened since: returns qty, order id or nil.
-- `fresh` holds answers given earlier in this same call.
local function replay(user, idem, fresh)
  if idem == nil or idem == '' then return nil end
  local k = user .. ':' .. idem
  local prev = fresh[k]
  if not prev then
    prev = redis.call('HGET', KEYS[5], k)
    if not prev then return nil end
    -- Written again, unchanged: the replay is then a write of this call, so
    -- a WAIT after it (--sync-replicas) also covers the first admission,
    -- made on another connection (docs/failover.md).
    redis.call('HSET', KEYS[5], k, prev)
  end
  local sep = string.find(prev, ':', 1, true)
  return tonumber(string.sub(prev, 1, sep - 1)), string.sub(prev, sep + 1)
end

-- This server's branch: the first 8 hex digits of its replication id (a
-- promoted replica draws a new one; a restart may too), or '' when INFO
-- does not say. Read once per call, and only by a call that admits.
local function branch_of()
  local info = redis.call('INFO', 'replication')
  return string.match(info, 'master_replid:(%x%x%x%x%x%x%x%x)') or ''
end

-- Redis TIME as unix microseconds (a number) and the reply itself.
local function time_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]), t
end

-- Fences the key set (a fence-only meta when its keys vanished: it expires,
-- since the activity may simply have been deleted; the order worker makes
-- it permanent when it rebuilds). seen: the admission count the caller saw.
local function fence_now(why, text, seen, vanished)
  local now = math.floor(time_us() / 1000)
  redis.call('HSET', KEYS[1], 'fence', why, 'fence_ms', now, 'fence_why', text, 'fence_adm', seen)
  if vanished then redis.call('PEXPIRE', KEYS[1], 10000) end
end

-- Numbers from and to text through a cache of the call: Lua 5.1 converts
-- with strtod and "%.14g" (glibc's floating-point printf), among the
-- costliest steps of an admission after the commands themselves, and a
-- batch's quantities and counts repeat. The same conversions, done once.
local num_of, text_of = {}, {}
local function num(s)
  local v = num_of[s]
  if v == nil then
    v = tonumber(s) or false
    num_of[s] = v
  end
  return v or nil
end
local function txt(v)
  local s = text_of[v]
  if not s then
    s = tostring(v)
    text_of[v] = s
  end
  return s
end

-- Decides n purchases (users[i], qtys[i] strings, idems[i] '' or a key) in
-- order. rl: the rate limits {u_rate, u_burst, ip_rate, ip_burst (strings,
-- '0' = off), ips = {ip_i or ''}} and the queue passes {passes = {pass_i
-- or ''}} (lib/pass.lua); the activity's own per-user limit in
-- meta (rl_rate, rl_burst) wins over u_rate/u_burst. Returns out = {rc_1,
-- oid_1, qty_1, ...} (a RATE_LIMITED entry carries its retry-after in ms
-- in the qty slot), the stock after (-1 when the call was refused before
-- the stock was read), and the key set's epoch and admission count after
-- the call (0, 0 when not read or when fenced). mem = {epoch ('' unknown),
-- adm}: what the caller saw last (docs/recovery.md).
local function admit_all(label, users, qtys, idems, n, rl, mem)
  local out, fresh = {}, {}
  -- label is "<ID>" or "<ID>.<seg>": the order id prefix; the stream's aid
  -- field is the activity id alone.
  local aid = string.match(label, '^(%d+)')
  local any_idem = false
  for i = 1, n do
    if idems[i] ~= '' then any_idem = true end
  end
  local stock = redis.call('GET', KEYS[2])
  -- Sold out: answer from the one GET (retries with a key may be replays).
  if stock == '0' and not any_idem then
    for i = 1, n do out[3 * i - 2] = RC.SOLD_OUT; out[3 * i - 1] = ''; out[3 * i] = 0 end
    return out, 0, 0, 0
  end
  local m = redis.call('HMGET', KEYS[1], 'open', 'start_ms', 'end_ms', 'limit', 'max_qty',
                       'rl_rate', 'rl_burst', 'segments', 'fence', 'epoch', 'adm', 'wr_seed')
  local gate, now_us, t = RC.OK, 0, nil
  if not stock and m[8] then
    -- A segmented activity's base keys hold no stock: the caller must route
    -- to the buyer's segment; the qty slot says how many there are.
    for i = 1, n do out[3 * i - 2] = RC.SEGMENTED; out[3 * i - 1] = ''; out[3 * i] = tonumber(m[8]) end
    return out, -1, 0, 0
  end
  local epoch, adm = m[10], tonumber(m[11] or '0')
  local same = mem.epoch ~= '' and mem.epoch == epoch
  if m[9] then
    gate = RC.RECOVERING
    -- what callers saw of the lost suffix: the resume counts it and lifts
    -- adm above it, so their memory does not fence the key set again
    if same and mem.adm > tonumber(redis.call('HGET', KEYS[1], 'fence_adm') or '0') then
      redis.call('HSET', KEYS[1], 'fence_adm', mem.adm)
    end
  elseif not m[1] or not m[2] or not m[3] or not m[4] or not m[5] or not stock then
    gate = RC.UNKNOWN_ACTIVITY
    if mem.epoch ~= '' and not stock and redis.call('EXISTS', KEYS[1]) == 0 then
      -- The caller knew this key set and it is gone (Redis restarted empty,
      -- or flushed): fence it until the order worker rebuilds it.
      fence_now('vanished', 'the keys vanished under a caller that knew epoch ' .. mem.epoch,
                mem.adm, true)
      gate = RC.RECOVERING
    end
  elseif same and adm < mem.adm then
    fence_now('rollback', 'admission count ' .. adm .. ' is behind the ' .. mem.adm ..
              ' a caller saw: Redis lost writes', mem.adm, false)
    gate = RC.RECOVERING
  elseif m[1] ~= '1' then
    gate = RC.CLOSED
  else
    now_us, t = time_us()
    local now = math.floor(now_us / 1000)
    if now < tonumber(m[2]) then gate = RC.NOT_STARTED
    elseif now >= tonumber(m[3]) then gate = RC.ENDED end
  end
  if gate ~= RC.OK then
    for i = 1, n do
      local pq, poid = replay(users[i], idems[i], fresh)
      if pq then out[3 * i - 2] = RC.OK; out[3 * i - 1] = poid; out[3 * i] = pq
      else out[3 * i - 2] = gate; out[3 * i - 1] = ''; out[3 * i] = 0 end
    end
    if gate == RC.RECOVERING then return out, -1, 0, 0 end
    return out, -1, tonumber(epoch or '0') or 0, adm
  end
  -- A key set preheated before the guard existed gets its epoch now, once.
  if not epoch then
    epoch = t[1] .. string.format('%06d', tonumber(t[2]))
    redis.call('HSET', KEYS[1], 'epoch', epoch)
  end
  local wr = wr_gate(aid, now_us, m[12]) -- nil: no waiting room (docs/waiting-room.md)
  local limit, maxq = tonumber(m[4]), tonumber(m[5])
  stock = tonumber(stock)
  -- Limiters are checked after the gate: a closed or not yet open sale
  -- answers without writing a limiter key.
  local u_period, u_burst
  if m[6] then u_period, u_burst = rl_params(m[6], m[7])
  else u_period, u_burst = rl_params(rl.u_rate, rl.u_burst) end
  local ip_period, ip_burst = rl_params(rl.ip_rate, rl.ip_burst)
  local held = redis.call('HMGET', KEYS[3], unpack(users, 1, n))
  local counts, dirty, ledger, idemw = {}, {}, {}, {}
  local sold, nadm, branch = 0, 0, nil
  for i = 1, n do
    local u, qs, k = users[i], qtys[i], idems[i]
    local rc, oid, q = RC.OK, '', 0
    local pq, poid = nil, nil
    local ip = rl.ips[i] or ''
    local uk, ut, ik, it = nil, 0, nil, 0
    if #u > 20 or not string.find(u, '^%d+$') or #k > 64
       or (ip ~= '' and (#ip > 45 or not string.find(ip, '^[%x:.]*$'))) then
      rc = RC.BAD_ARGUMENT
    elseif wr and wr_refused(wr, u, rl.passes and rl.passes[i], k ~= '' and replay(u, k, fresh)) then
      rc = wr.why -- refused before any limiter is charged: it changes nothing
    else
      -- Every request that reaches admission counts, retries included,
      -- except one refused for lack of stock (charged below): a segment
      -- passes those on to borrow and re-admits them, which must charge
      -- once. A rate-limited one changes nothing else.
      local wait = 0
      if u_period then
        uk = RL_PREFIX .. 'u:' .. u
        wait, ut = gcra(uk, now_us, u_period, u_burst)
      end
      if wait == 0 and ip_period and ip ~= '' then
        ik = RL_PREFIX .. 'ip:' .. ip
        wait, it = gcra(ik, now_us, ip_period, ip_burst)
      end
      if wait > 0 then
        rc, q = RC.RATE_LIMITED, wait
      elseif k ~= '' then
        pq, poid = replay(u, k, fresh)
      end
    end
    if pq then
      oid, q = poid, pq
    elseif rc == RC.OK then
      q = num(qs)
      if not q or q < 1 or q > maxq or q % 1 ~= 0 then
        rc, q = RC.BAD_QUANTITY, 0
      elseif stock <= 0 then
        rc, q = RC.SOLD_OUT, 0
      elseif stock < q then
        rc, q = RC.INSUFFICIENT, 0
      else
        local had = counts[u] or num(held[i] or '0')
        if had + q > limit then
          rc, q = RC.LIMIT_EXCEEDED, 0
        else
          stock = stock - q
          sold = sold + q
          if not counts[u] then dirty[#dirty + 1] = u end
          counts[u] = had + q
          if wr then wr_spend(wr, u) end
          -- The order id is the stream entry id and this server's branch
          -- (order_id.h): two masters admitting after a split hand out the
          -- same entry ids, never the same branch. n numbers the admission
          -- (the order worker keeps the highest one persisted), b and k
          -- travel to the database with it (the Idempotency-Key is put back
          -- with the order after a rollback: docs/recovery.md).
          nadm = nadm + 1
          if not branch then branch = branch_of() end
          local sid
          if branch ~= '' and k == '' then -- the common case, without a table
            sid = redis.call('XADD', KEYS[4], '*', 'aid', aid, 'uid', u, 'qty', q, 'n', adm + nadm,
                             'b', branch)
          else
            local ev = {'aid', aid, 'uid', u, 'qty', q, 'n', adm + nadm}
            if branch ~= '' then ev[#ev + 1] = 'b'; ev[#ev + 1] = branch end
            if k ~= '' then ev[#ev + 1] = 'k'; ev[#ev + 1] = k end
            sid = redis.call('XADD', KEYS[4], '*', unpack(ev))
          end
          oid = label .. '-' .. sid
          if branch ~= '' then oid = oid .. '-' .. branch end
          -- The ledger lets release check the order is real and whose it
          -- is, even after its stream entry was persisted and trimmed.
          ledger[#ledger + 1] = oid
          ledger[#ledger + 1] = u .. ':' .. txt(q)
          if k ~= '' then
            local v = txt(q) .. ':' .. oid
            fresh[u .. ':' .. k] = v
            idemw[#idemw + 1] = u .. ':' .. k
            idemw[#idemw + 1] = v
          end
        end
      end
    end
    if (uk or ik) and rc ~= RC.RATE_LIMITED and rc ~= RC.SOLD_OUT and rc ~= RC.INSUFFICIENT then
      if uk then gcra_set(uk, now_us, ut) end
      if ik then gcra_set(ik, now_us, it) end
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
    redis.call('HINCRBY', KEYS[1], 'adm', nadm)
  end
  if #idemw > 0 then redis.call('HSET', KEYS[5], unpack(idemw)) end
  return out, stock, tonumber(epoch), adm + nadm
end
