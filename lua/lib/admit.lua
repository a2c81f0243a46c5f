-- lib/admit.lua - admission logic of purchase_batch.lua
-- (inlined at build time by tools/gen_scripts.c).
--
-- KEYS (K_PURCHASE of src/engine/script_pos.def, in its order): meta
-- (hash), stock (string), buyers (hash user->units), orders (stream), idem
-- (hash "user:key" -> "qty:order_id"), ledger (hash order_id -> "user:qty",
-- ":released" appended on release), xin (hash transfer id -> units
-- received; segments only), wr_spent (hash user -> expiry of the queue
-- pass a purchase spent), reg (set: the registered buyers,
-- docs/fairness.md). Then KEYS[NK + i] the rate limiter key of purchase
-- i's buyer, and, when the call
-- carries a per-IP limit, KEYS[NK + n + i] the one of its client IP, and,
-- when the call carries challenge tickets, after those the spent key of
-- each purchase's challenge (lib/challenge.lua; a bare prefix for one
-- without) (src/engine/keys.c builds them all; admit_keys_ok checks the
-- count).
-- One activity (or one segment of it), one hash tag, one slot.
--
-- Rollback guard (docs/recovery.md): meta holds `epoch` (the key set's
-- incarnation) and `adm` (orders ever admitted here; each stream entry
-- carries its number as field `n`). A caller passes the (epoch, adm) it
-- saw last; the same epoch with a smaller adm means Redis went back in
-- time, and the call fences the key set (lib/fence.lua) before it sells
-- anything. While `fence` is set every purchase is refused RECOVERING.
--
-- The store's identity (docs/design.md): preheat writes meta `store_id`,
-- the identity of the database that holds the activity, whose order
-- workers persist its stream. A caller passes its own (c.store, '' when it
-- does not know it); another one is refused OTHER_STORE before anything
-- is read or written for the purchases, and the refusal is noted in meta
-- (`store_refused`, `store_refused_ms`, at most once a second) for
-- reconcile. A key set preheated before identities existed takes the
-- first caller's.
--
-- Invariant kept by every script: stock + sum(buyers) == initial, or for a
-- segment (docs/segments.md) stock + sum(buyers) == initial + xin - xout.
--
-- Cost matters here (every admission runs this): reads are gathered into
-- one GET, one HMGET of meta and one HMGET of all the buyers; decisions are
-- made in Lua; writes are gathered into one DECRBY, one HSET per hash and
-- one XADD: the call's orders share one stream entry (below). A script is
-- atomic, so reading first and writing last is the same as interleaving.
--
-- The order event (docs/design.md, "Redis data model"): a call that
-- admits one order writes one entry {aid, uid, qty, n, b[, k]}, its order
-- id "<label>-<entry id>-<branch>"; a call that admits several writes one
-- entry for all of them {aid, n (the first's number), b, c (how many), uid
-- and qty (space-separated lists, in admission order)[, k ("<i>:<key>"
-- for each order with an Idempotency-Key, space-separated: keys are
-- visible ASCII, never a space)]}, order i's id
-- "<label>-<entry id>-<branch>-<i>" (i from 0), its number n + i. One XADD
-- per call instead of one per order is most of the admission's cost in
-- Redis saved (BENCHMARKS.md, issue 23).

-- Rate limiting: lib/gcra.lua.
--#include "lib/time.lua"
--#include "lib/fence.lua"
--#include "lib/pass.lua"
--#include "lib/challenge.lua"
--#include "lib/gcra.lua"

-- KEYS before the rate limiters' (the key set's own).
local NK = K_PURCHASE.N

-- The KEYS of a call of n purchases are all there: the key set's NK, a
-- limiter key per buyer, one per client IP when ip_rate turns the per-IP
-- limiter on, and one per purchase when the call carries a challenge
-- ticket (tickets: some purchase's is not ''; a key too many is no ticket's
-- key). Returns whether they are and the index before the first challenge
-- key (false: none carried).
local function admit_keys_ok(n, ip_rate, tickets)
  local k = NK + n * (rl_params(ip_rate, nil) and 2 or 1)
  if tickets then return #KEYS == k + n, k end
  return #KEYS == k, false
end

-- A purchase retried with the same Idempotency-Key gets the first accepted
-- answer back, whatever happened since: returns qty, order id or nil.
-- `fresh` holds answers given earlier in this same call, {qty, order
-- number}: their ids are known at commit only, so the number stands in
-- for the id in the answer until then (commit puts the ids in).
local function replay(user, idem, fresh)
  if idem == nil or idem == '' then return nil end
  local k = user .. ':' .. idem
  local prev = fresh[k]
  if prev then return prev[1], prev[2] end
  prev = redis.call('HGET', KEYS[K_PURCHASE.idem], k)
  if not prev then return nil end
  -- Written again, unchanged: the replay is then a write of this call, so
  -- a WAIT after it (--sync-replicas) also covers the first admission,
  -- made on another connection (docs/failover.md).
  redis.call('HSET', KEYS[K_PURCHASE.idem], k, prev)
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

-- The call (the admission's one parameter), built by the script:
--   c.label  "<ID>" or "<ID>.<seg>": the order id prefix (c.aid, the
--            stream's aid field, is the activity id alone)
--   c.n      purchases; c.users[i] the buyer of purchase i (text)
--   c.a, c.at  where the purchases are: purchase i's user, quantity,
--            Idempotency-Key ('' none), client IP ('' none), queue pass
--            ('' none; lib/pass.lua) and challenge ticket ('' none;
--            lib/challenge.lua) are c.a[p + A_BUY.user] .. c.a[p + A_BUY.ticket],
--            p = c.at + A_BUY.N * (i - 1) (purchase_batch's ARGV as it came:
--            copying it into tables per field costs more than the rest of
--            a purchase's decision)
--   c.any_idem (some purchase has a key)
--   c.chk    the index before the challenge keys in KEYS (false: none)
--   c.rl     the call's rate limits {u_rate, u_burst, ip_rate, ip_burst}
--            (strings, '0' or nil = off); the activity's own per-user
--            limit in meta (rl_rate, rl_burst) wins over u_rate/u_burst
--   c.mem    {epoch ('' unknown), adm}: what the caller saw last of the key
--            set (docs/recovery.md)
--   c.store  the caller's store identity ('' unknown: not checked)
-- out = {rc_1, oid_1, qty_1, ...}: a RATE_LIMITED entry carries its
-- retry-after in ms in the qty slot, a SEGMENTED one the segment count, an
-- OK one that replays an earlier answer (Idempotency-Key) -qty, so callers
-- count replays apart from admissions.

-- Answers every purchase rc (qty slot q), but with replays a retry with
-- an Idempotency-Key gets its first accepted answer.
local function answer_all(c, out, rc, q, replays)
  local fresh = {}
  for i = 1, c.n do
    local pq, poid = nil, nil
    if replays then
      pq, poid = replay(c.users[i], c.a[c.at + A_BUY.N * i - (A_BUY.N - A_BUY.idem)], fresh)
    end
    if pq then out[3 * i - 2] = RC.OK; out[3 * i - 1] = poid; out[3 * i] = -pq
    else out[3 * i - 2] = rc; out[3 * i - 1] = ''; out[3 * i] = q end
  end
  return out
end

-- A caller of another store: noted in meta for reconcile (at most once a
-- second, whatever the rate of such calls), and refused.
local function store_refused(store)
  local now = now_ms()
  local meta = KEYS[K_PURCHASE.meta]
  if now - tonumber(redis.call('HGET', meta, 'store_refused_ms') or '0') >= 1000 then
    redis.call('HSET', meta, 'store_refused', store, 'store_refused_ms', now)
  end
  return RC.OTHER_STORE
end

-- A key the sale keeps that vanished under it (an operator's DEL, an
-- eviction, a flush): meta `keys` says which must exist (1 the order
-- stream, 2 the ledger, 4 the idem hash: set by the first write of each;
-- 8 the registrants' set: lib/reg.lua),
-- and the buyers hash must while units are held (stock + sum(buyers) ==
-- initial + xin - xout + oversold). One EXISTS of those. Returns the names
-- of the missing ones, or nil.
local function keys_lost(m, stock)
  local must = tonumber(m[M_ADMIT.keys] or '0') or 0
  local ks, names, n = {}, {}, 0
  local function want(k, name) n = n + 1; ks[n] = k; names[n] = name end
  if must % 2 == 1 then want(KEYS[K_PURCHASE.orders], 'orders') end
  if must % 4 >= 2 then want(KEYS[K_PURCHASE.ledger], 'ledger') end
  if must % 8 >= 4 then want(KEYS[K_PURCHASE.idem], 'idem') end
  if must >= 8 then want(KEYS[K_PURCHASE.reg], 'reg') end
  if tonumber(stock) < tonumber(m[M_ADMIT.initial] or '0') + tonumber(m[M_ADMIT.xin] or '0')
                       - tonumber(m[M_ADMIT.xout] or '0')
                       + tonumber(m[M_ADMIT.oversold] or '0') then
    want(KEYS[K_PURCHASE.buyers], 'buyers')
  end
  if n == 0 then return nil end
  local first = ks[1] -- every one of ks is one of KEYS
  if redis.call('EXISTS', first, unpack(ks, 2, n)) == n then return nil end
  local gone = {}
  for i = 1, n do
    local key = ks[i]
    if redis.call('EXISTS', key) == 0 then gone[#gone + 1] = names[i] end
  end
  return table.concat(gone, ' ')
end

-- The gate, once per call, on meta m and the stock's text: OK, or the code
-- that refuses every purchase. Fences the key set when the caller knew
-- more of it than Redis holds (its keys vanished, or its count went back),
-- and when some of its keys vanished and others did not (those the order
-- worker salvages before it rebuilds: no order id is handed out twice, no
-- buyer buys past the limit meanwhile).
local function gate_of(c, m, stock)
  local meta = KEYS[K_PURCHASE.meta]
  local mem, epoch, adm = c.mem, m[M_ADMIT.epoch], tonumber(m[M_ADMIT.adm] or '0')
  local same = mem.epoch ~= '' and mem.epoch == epoch
  if m[M_ADMIT.fence] then
    -- what callers saw of the lost suffix: the resume counts it and lifts
    -- adm above it, so their memory does not fence the key set again
    if same and mem.adm > tonumber(redis.call('HGET', meta, 'fence_adm') or '0') then
      redis.call('HSET', meta, 'fence_adm', mem.adm)
    end
    return RC.RECOVERING
  end
  local defined = m[M_ADMIT.open] and m[M_ADMIT.start_ms] and m[M_ADMIT.end_ms]
                  and m[M_ADMIT.limit] and m[M_ADMIT.max_qty]
  if not defined or not stock then
    if defined or stock then
      -- half a key set: never a deletion (that removes every key at once)
      fence_set(meta, 'lost', (defined and 'the stock key' or 'the meta hash') ..
                ' vanished while the other keys are there', {seen = same and mem.adm or nil})
      return RC.RECOVERING
    end
    if mem.epoch ~= '' and redis.call('EXISTS', meta) == 0 then
      -- The caller knew this key set and it is gone (Redis restarted empty,
      -- or flushed): fenced until the order worker rebuilds it.
      fence_set(meta, 'vanished', 'the keys vanished under a caller that knew epoch ' ..
                mem.epoch, {seen = mem.adm, expire_ms = 10000})
      return RC.RECOVERING
    end
    return RC.UNKNOWN_ACTIVITY
  end
  if c.store ~= '' and m[M_ADMIT.store_id] ~= c.store then
    if m[M_ADMIT.store_id] then return store_refused(c.store) end
    redis.call('HSET', meta, 'store_id', c.store)
  end
  if same and adm < mem.adm then
    fence_set(meta, 'rollback', 'admission count ' .. adm .. ' is behind the ' .. mem.adm ..
              ' a caller saw: Redis lost writes', {seen = mem.adm})
    return RC.RECOVERING
  end
  if m[M_ADMIT.open] ~= '1' then return RC.CLOSED end
  local now = now_ms()
  if now < tonumber(m[M_ADMIT.start_ms]) then return RC.NOT_STARTED end
  if now >= tonumber(m[M_ADMIT.end_ms]) then return RC.ENDED end
  local gone = keys_lost(m, stock)
  if gone then
    fence_set(meta, 'lost', 'keys vanished: ' .. gone, {seen = same and mem.adm or nil})
    return RC.RECOVERING
  end
  -- the waiting room's "queue everyone": nobody buys, pass or not
  if m[M_ADMIT.wr_hold] == 'all' then return RC.QUEUE_PAUSED end
  return RC.OK
end

-- The state of a call past its gate: the figures its purchases are decided
-- on, and the writes they gather (counts, ledger, idem) for commit.
local function open_call(c, m, stock)
  local epoch = m[M_ADMIT.epoch]
  -- A key set preheated before the guard existed gets its epoch now, once.
  if not epoch then
    epoch = epoch_now()
    redis.call('HSET', KEYS[K_PURCHASE.meta], 'epoch', epoch)
  end
  -- Every field is set here, never added later (nor set to nil): a table
  -- given a new key rehashes, and this one is read once per purchase.
  local s = {c = c, stock = tonumber(stock), limit = tonumber(m[M_ADMIT.limit]),
             maxq = tonumber(m[M_ADMIT.max_qty]), epoch = epoch,
             adm = tonumber(m[M_ADMIT.adm] or '0'), keys = tonumber(m[M_ADMIT.keys] or '0') or 0,
             now_us = 0, fresh = {},
             counts = {}, dirty = {}, oi = {}, q1 = true, sold = 0, nadm = 0,
             uk = false, ik = false, ut = 0, it = 0, wr = false, oids = false, u_period = false,
             u_burst = false, ip_period = false, ip_burst = false, held = false, ch = false,
             ck = false, cx = false, now = 0,
             reg = m[M_ADMIT.reg_start] and KEYS[K_PURCHASE.reg] or false}
  -- nil: no waiting room (docs/waiting-room.md)
  if m[M_ADMIT.wr_seed] then
    s.wr = wr_gate(c.aid, now_ms(), m[M_ADMIT.wr_seed], KEYS[K_PURCHASE.wr_spent]) or false
  end
  -- nil: no challenge, or a waiting room, whose join took it (docs/challenges.md)
  if m[M_ADMIT.ch] and not s.wr then
    s.ch = ch_gate(m[M_ADMIT.ch], m[M_ADMIT.ch_floor]) or false
    s.now = now_ms()
  end
  -- Limiters are checked after the gate: a closed or not yet open sale
  -- answers without writing a limiter key.
  local rl = c.rl
  if m[M_ADMIT.rl_rate] then
    s.u_period, s.u_burst = rl_params(m[M_ADMIT.rl_rate], m[M_ADMIT.rl_burst])
  elseif (rl.u_rate or '0') ~= '0' then
    s.u_period, s.u_burst = rl_params(rl.u_rate, rl.u_burst)
  end
  if (rl.ip_rate or '0') ~= '0' then s.ip_period, s.ip_burst = rl_params(rl.ip_rate, rl.ip_burst) end
  s.u_period, s.ip_period = s.u_period or false, s.ip_period or false
  if s.u_period or s.ip_period then s.now_us = now_us() end
  s.held = redis.call('HMGET', KEYS[K_PURCHASE.buyers], unpack(c.users, 1, c.n))
  return s
end

-- A user id as the caller sends it: 1..20 decimal digits.
local function user_ok(u)
  return #u <= 20 and string.find(u, '^%d+$') ~= nil
end

-- What decides purchase i before its stock is looked at: a malformed entry,
-- the waiting room or the challenge (lib/challenge.lua), the rate limiters,
-- an Idempotency-Key retry (its first answer). Returns rc, oid, q; OK with no oid goes on to take. The limiter
-- charges it owes are left in s.uk/s.ut and s.ik/s.it: every request that
-- reaches admission counts, retries included, except one refused for lack
-- of stock (a segment passes those on to borrow and re-admits them, which
-- must charge once). A refused one changes nothing.
local function check(s, i)
  local c = s.c
  local p = c.at + A_BUY.N * i - A_BUY.N
  local u, k, ip = c.users[i], c.a[p + A_BUY.idem], c.a[p + A_BUY.ip]
  s.uk, s.ik, s.ck = false, false, false -- never nil: a nil store to a missing field rehashes s
  if not user_ok(u) or #k > 64
     or (ip ~= '' and (#ip > 45 or not string.find(ip, '^[%x:.]*$'))) then
    return RC.BAD_ARGUMENT, '', 0
  end
  -- pre-registration: only registered buyers (one SISMEMBER)
  if s.reg and redis.call('SISMEMBER', s.reg, u) == 0 then return RC.NOT_REGISTERED, '', 0 end
  if s.wr and wr_refused(s.wr, u, c.a[p + A_BUY.pass], k ~= '' and replay(u, k, s.fresh)) then
    return s.wr.why, '', 0 -- before any limiter: it changes nothing
  end
  if s.ch and not (k ~= '' and replay(u, k, s.fresh)) then
    local ck = c.chk and KEYS[c.chk + i]
    local why, exp = ch_refused(s.ch, c.a[p + A_BUY.ticket], ck, s.now)
    if why then return why, '', 0 end
    s.ck, s.cx = ck, exp -- spent after take, unless refused for stock (a borrow re-admits it)
  end
  local wait = 0
  if s.u_period then
    s.uk = KEYS[NK + i]
    wait, s.ut = gcra(s.uk, s.now_us, s.u_period, s.u_burst)
  end
  if wait == 0 and s.ip_period and ip ~= '' then
    s.ik = KEYS[NK + c.n + i]
    wait, s.it = gcra(s.ik, s.now_us, s.ip_period, s.ip_burst)
  end
  if wait > 0 then return RC.RATE_LIMITED, '', wait end
  local pq, poid = replay(u, k, s.fresh)
  if pq then return RC.OK, poid, -pq end
  return RC.OK, nil, 0
end

-- Purchase i on the stock: quantity, stock (before the buyer's count, so a
-- sold-out refusal reads nothing more), the buyer's limit; then the order,
-- whose id commit makes: returns rc, the order's number in this call (a
-- stand-in for its id), q.
local function take(s, i)
  local c = s.c
  local p = c.at + A_BUY.N * i - A_BUY.N
  local u, qt = c.users[i], c.a[p + A_BUY.qty]
  local q = qt == '1' and 1 or num(qt)
  if not q or q < 1 or q > s.maxq or q % 1 ~= 0 then return RC.BAD_QUANTITY, '', 0 end
  local stock = s.stock
  if stock <= 0 then return RC.SOLD_OUT, '', 0 end
  if stock < q then return RC.INSUFFICIENT, '', 0 end
  local counts = s.counts
  local had = counts[u]
  local first = had == nil
  if first then had = num(s.held[i] or '0') end
  if had + q > s.limit then return RC.LIMIT_EXCEEDED, '', 0 end
  local o = s.nadm + 1
  s.stock, s.sold, s.nadm = stock - q, s.sold + q, o
  if first then
    local dirty = s.dirty
    dirty[#dirty + 1] = u
  end
  counts[u] = had + q
  if s.wr then wr_spend(s.wr, u) end
  s.oi[o] = i
  if qt ~= '1' then s.q1 = false end
  local k = c.a[p + A_BUY.idem]
  if k ~= '' then s.fresh[u .. ':' .. k] = {q, o} end
  return RC.OK, o, q
end

-- The stream entry of the call's orders (one, or one for several: see the
-- top of this file); returns the order ids' common part, to which
-- "-<i>" is added for an entry of several (nil: one entry per order, ids
-- in s.oids). n numbers the first admission (the order worker keeps the
-- highest one persisted), b and k travel to the database with the orders
-- (the Idempotency-Key is put back with the order after a rollback:
-- docs/recovery.md). b is this server's branch (order_id.h): two masters
-- admitting after a split hand out the same entry ids, never the same
-- branch. Order o is purchase s.oi[o], its quantity's text canonical
-- (txt) unless it is '1'.
local function order_events(s)
  local c, n0, no = s.c, s.adm + 1, s.nadm
  local a, at, oi = c.a, c.at, s.oi
  local branch = branch_of()
  if no > 1 and branch ~= '' then
    local us, qs
    if no == c.n then us = table.concat(c.users, ' ', 1, no) end
    if s.q1 then qs = string.rep('1 ', no - 1) .. '1' end -- Lua 5.1: no separator argument
    if not us or not qs then
      local ul, ql = {}, {}
      for o = 1, no do
        local p = at + A_BUY.N * oi[o] - A_BUY.N
        ul[o], ql[o] = a[p + A_BUY.user], txt(num(a[p + A_BUY.qty]))
      end
      us, qs = table.concat(ul, ' '), table.concat(ql, ' ')
    end
    local ev = {'aid', c.aid, 'n', n0, 'b', branch, 'c', no, 'uid', us, 'qty', qs}
    if c.any_idem then
      local keyed = {}
      for o = 1, no do
        local k = a[at + A_BUY.N * oi[o] - (A_BUY.N - A_BUY.idem)]
        if k ~= '' then keyed[#keyed + 1] = string.format('%d:%s', o - 1, k) end
      end
      if #keyed > 0 then ev[13] = 'k'; ev[14] = table.concat(keyed, ' ') end
    end
    local sid = redis.call('XADD', KEYS[K_PURCHASE.orders], '*', unpack(ev))
    return c.label .. '-' .. sid .. '-' .. branch .. '-'
  end
  -- One order, or a server that does not say its branch (ids without an
  -- index need an entry each): an entry per order.
  s.oids = {}
  for o = 1, no do
    local p = at + A_BUY.N * oi[o] - A_BUY.N
    local ev = {'aid', c.aid, 'uid', a[p + A_BUY.user], 'qty', txt(num(a[p + A_BUY.qty])),
                'n', n0 + o - 1}
    if branch ~= '' then ev[#ev + 1] = 'b'; ev[#ev + 1] = branch end
    if a[p + A_BUY.idem] ~= '' then ev[#ev + 1] = 'k'; ev[#ev + 1] = a[p + A_BUY.idem] end
    local sid = redis.call('XADD', KEYS[K_PURCHASE.orders], '*', unpack(ev))
    s.oids[o] = branch ~= '' and c.label .. '-' .. sid .. '-' .. branch or c.label .. '-' .. sid
  end
end

-- The digits of an order's place in its entry (0..1023), without Lua's
-- number-to-text conversion (glibc's "%.14g"): the order id is then one
-- concatenation.
local DIG = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}
local function oid_at(pre, j)
  if j < 10 then return pre .. DIG[j] end
  if j < 100 then return pre .. DIG[(j - j % 10) / 10] .. DIG[j % 10] end
  local h = (j - j % 100) / 100
  if j < 1000 then return pre .. DIG[h] .. DIG[(j % 100 - j % 10) / 10] .. DIG[j % 10] end
  return pre .. '1' .. DIG[h - 10] .. DIG[(j % 100 - j % 10) / 10] .. DIG[j % 10]
end

-- The call's writes, gathered, and the order ids put into out in place of
-- the order numbers take left there; returns the stock after, epoch and
-- adm.
local function commit(s, out)
  local nadm = s.nadm
  if nadm > 0 then
    local pre = order_events(s)
    redis.call('DECRBY', KEYS[K_PURCHASE.stock], s.sold)
    local bw, dirty, counts = {}, s.dirty, s.counts
    for j = 1, #dirty do
      local u = dirty[j]
      bw[2 * j - 1] = u
      bw[2 * j] = txt(counts[u])
    end
    redis.call('HSET', KEYS[K_PURCHASE.buyers], unpack(bw))
    -- The ledger lets release check the order is real and whose it is,
    -- even after its stream entry was persisted and trimmed.
    local a, at, oi, oids, any_idem = s.c.a, s.c.at, s.oi, s.oids, s.c.any_idem
    local ledger, idemw = {}, nil
    for o = 1, nadm do
      local i = oi[o]
      local p = at + A_BUY.N * i - A_BUY.N
      local u, qt = a[p + A_BUY.user], a[p + A_BUY.qty]
      if qt ~= '1' then qt = txt(num(qt)) end
      local oid = pre and oid_at(pre, o - 1) or oids[o]
      ledger[2 * o - 1] = oid
      ledger[2 * o] = u .. ':' .. qt
      out[3 * i - 1] = oid
      if any_idem and a[p + A_BUY.idem] ~= '' then
        idemw = idemw or {}
        idemw[#idemw + 1] = u .. ':' .. a[p + A_BUY.idem]
        idemw[#idemw + 1] = qt .. ':' .. oid
      end
    end
    redis.call('HSET', KEYS[K_PURCHASE.ledger], unpack(ledger))
    redis.call('HINCRBY', KEYS[K_PURCHASE.meta], 'adm', nadm)
    -- the keys that must exist from now on (keys_lost): once per epoch
    local must = s.keys
    if must % 4 ~= 3 then must = must - must % 4 + 3 end
    if idemw and must % 8 < 4 then must = must + 4 end
    if must ~= s.keys then redis.call('HSET', KEYS[K_PURCHASE.meta], 'keys', must) end
    if idemw then
      redis.call('HSET', KEYS[K_PURCHASE.idem], unpack(idemw))
      -- replays of this call's own orders (same user and key twice)
      for j = 2, #out, 3 do
        if type(out[j]) == 'number' then out[j] = ledger[2 * out[j] - 1] end
      end
    end
  end
  return s.stock, tonumber(s.epoch), s.adm + nadm
end

-- Decides the call's purchases in order. Returns out, the stock after (-1
-- when refused before the stock was read), and the key set's epoch and
-- admission count after the call (0, 0 when not read or when fenced).
local function admit_all(c)
  local out = {}
  c.aid = string.match(c.label, '^(%d+)')
  local stock = redis.call('GET', KEYS[K_PURCHASE.stock])
  -- Sold out: answered from the one GET (retries with a key may be replays).
  if stock == '0' and not c.any_idem then return answer_all(c, out, RC.SOLD_OUT, 0), 0, 0, 0 end
  local m = redis.call('HMGET', KEYS[K_PURCHASE.meta], M_ADMIT.FIELDS)
  if not stock and m[M_ADMIT.segments] then
    -- A segmented activity's base keys hold no stock: the caller routes to
    -- the buyer's segment.
    return answer_all(c, out, RC.SEGMENTED, tonumber(m[M_ADMIT.segments])), -1, 0, 0
  end
  local gate = gate_of(c, m, stock)
  if gate == RC.RECOVERING then return answer_all(c, out, gate, 0, true), -1, 0, 0 end
  -- another store's caller learns nothing of the key set (no epoch, no
  -- count: its memory must never fence the owner's sale)
  if gate == RC.OTHER_STORE then return answer_all(c, out, gate, 0, false), -1, 0, 0 end
  if gate ~= RC.OK then
    return answer_all(c, out, gate, 0, true), -1, tonumber(m[M_ADMIT.epoch] or '0') or 0,
           tonumber(m[M_ADMIT.adm] or '0')
  end
  local s = open_call(c, m, stock)
  -- A plain purchase (no waiting room, no rate limiter, no Idempotency-Key,
  -- no client IP: what check decides is then its user id alone) goes
  -- straight to take: this is the path of most admissions.
  local a, at, users = c.a, c.at, c.users
  local plain = not s.wr and not s.u_period and not s.ip_period and not s.ch and not s.reg
  for i = 1, c.n do
    local rc, oid, q
    local p = at + A_BUY.N * i - A_BUY.N
    if plain and a[p + A_BUY.idem] == '' and a[p + A_BUY.ip] == '' then
      if user_ok(users[i]) then rc, oid, q = take(s, i) else rc, oid, q = RC.BAD_ARGUMENT, '', 0 end
    else
      rc, oid, q = check(s, i)
      if rc == RC.OK and not oid then rc, oid, q = take(s, i) end
    end
    if (s.uk or s.ik) and rc ~= RC.RATE_LIMITED and rc ~= RC.SOLD_OUT and rc ~= RC.INSUFFICIENT then
      if s.uk then gcra_set(s.uk, s.now_us, s.ut) end
      if s.ik then gcra_set(s.ik, s.now_us, s.it) end
    end
    if s.ck and rc ~= RC.SOLD_OUT and rc ~= RC.INSUFFICIENT then ch_spend(s.ch, s.ck, s.cx) end
    -- one by one, in order: Lua assigns a multiple assignment last first,
    -- which puts the keys in the table's hash part and rehashes it
    out[3 * i - 2] = rc
    out[3 * i - 1] = oid
    out[3 * i] = q
  end
  return out, commit(s, out)
end
