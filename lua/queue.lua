-- queue.lua - the waiting room of one activity (docs/waiting-room.md):
-- joins and polls of several buyers, decided in one call on Redis's clock.
-- KEYS: meta q pass stock reg held (the activity's base key set {a<ID>}:
--       the queue lives there with or without segments), then, when the
--       call carries challenge tickets, per buyer its challenge's spent key
--       (lib/challenge.lua)
-- ARGV: activity id, then per buyer: op ('j' join, 'p' poll), user id,
--       challenge ticket ('' none; a join that enters the queue needs one
--       when the activity asks a challenge: docs/challenges.md)
-- Returns {rc, queue length, passes issued (the first that many places hold
-- one), passes per second, ms until the start (0 once started), segments
-- (1: none), seats given back to the pace by this call (passes unused in
-- their time), of them passes handed out (the rest were never fetched), the
-- emergency controls (bits: 1 paused, 2 everyone queued, 4 no new joins), then per
-- buyer: rc (Q_WAITING, Q_ADMITTED, Q_USED, Q_EXPIRED or a refusal:
-- RECOVERING while the key set is fenced, NOT_REGISTERED, JOINS_CLOSED),
-- place (1 is the front; 0 before the start, when nothing is drawn yet),
-- pass expiry (unix ms, 0: none), pass ('' none), events (1: a pass was
-- handed out by this call, 2: this call found the pass expired)}.
-- rc is not OK when the whole call is refused (every buyer then has it). A
-- malformed call is answered the head alone, rc BAD_ARGUMENT (lib/args.lua).
--
-- The queue is a sorted set. Before the start a joiner's score is a keyed
-- pseudo-random number of (seed, user) below 2^52 (the draw); from the
-- start on it is 2^52 + an arrival counter, so later joiners are behind
-- every early one in arrival order, and the early ones' order is fixed the
-- moment the start passes (nobody can join their group any more). The
-- first `issued` places hold passes (lib/pace.lua): issued grows at wr_rate
-- per second from wr_base at wr_base_ms (the start at first), and when it
-- would run ahead of the queue it is rebased to the queue's length instead,
-- so no passes are banked for a burst of late joiners.
--
-- Seats (held): a place the pace reached holds a seat until its pass is
-- spent or its deadline passes: the TTL from when the pace reached it, or
-- from when its buyer fetched the pass. A seat whose deadline passed
-- unspent goes back to the pace (wr_base + 1: the next place gets a pass
-- now), so tabs that closed cost no capacity. Paused (wr_hold), the count
-- stands still and no seat goes back.
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/pass.lua"
--#include "lib/challenge.lua"
--#include "lib/pace.lua"
--#include "lib/reg.lua"
local TWO52 = 4503599627370496
-- buyer i's arguments: ARGV[b + A_JOIN.op] .. ARGV[b + A_JOIN.ticket],
-- b = A_JOIN.N * i + B0
local B0 = A_QUEUE.N + 1 - A_JOIN.N
local aid, n = ARGV[A_QUEUE.aid] or '', (#ARGV - A_QUEUE.N) / A_JOIN.N
if not digits(aid, 15) or n < 1 or n ~= math.floor(n)
   or (#KEYS ~= K_QUEUE.N and #KEYS ~= K_QUEUE.N + n) then
  return bad_args(0, 0, 0, 0, 0, 0, 0, 0)
end
local m = redis.call('HMGET', KEYS[K_QUEUE.meta], M_QUEUE.FIELDS)
local now = now_ms()
local HEAD = 9
local out = {RC.OK, 0, 0, tonumber(m[M_QUEUE.wr_rate] or '') or 0, 0,
             tonumber(m[M_QUEUE.segments] or '') or 1, 0, 0,
             wr_control_bits(m[M_QUEUE.wr_hold], m[M_QUEUE.wr_nojoin])}

local function answer(i, rc, place, exp, pass, ev)
  local b = HEAD + 5 * (i - 1)
  out[b + 1], out[b + 2], out[b + 3], out[b + 4], out[b + 5] = rc, place, exp, pass, ev
end

-- The whole call refused with rc.
local function all(rc)
  out[1] = rc
  for i = 1, n do answer(i, rc, 0, 0, '', 0) end
  return out
end

-- A fenced key set is being rebuilt (docs/recovery.md): nobody joins and no
-- pass is handed out until it resumes, and the pace stands still from the
-- fence on (the count is rebased to what it was at the fence, at now), so
-- no passes pile up for the moment it resumes. A vanished key set's
-- fence-only meta holds nothing to freeze.
if m[M_QUEUE.fence] then
  local start, rate = tonumber(m[M_QUEUE.start_ms] or ''), tonumber(m[M_QUEUE.wr_rate] or '')
  if start and rate and m[M_QUEUE.wr_seed] and now >= start then
    local base = tonumber(m[M_QUEUE.wr_base] or '') or 0
    local base_ms = tonumber(m[M_QUEUE.wr_base_ms] or '') or start
    local upto = math.max(base_ms, math.min(tonumber(m[M_QUEUE.fence_ms] or '') or now, now))
    local a = base + math.floor((upto - base_ms) * rate / 1000)
    local len = redis.call('ZCARD', KEYS[K_QUEUE.wr_q])
    if a > len then a = len end
    redis.call('HSET', KEYS[K_QUEUE.meta], 'wr_base', a, 'wr_base_ms', now)
  end
  return all(RC.RECOVERING)
end
if not m[M_QUEUE.start_ms] or not m[M_QUEUE.end_ms] then return all(RC.UNKNOWN_ACTIVITY) end
if not m[M_QUEUE.wr_rate] or not m[M_QUEUE.wr_ttl] or not m[M_QUEUE.wr_seed] then
  return all(RC.NO_WAITING_ROOM)
end
local start = tonumber(m[M_QUEUE.start_ms])
if now >= tonumber(m[M_QUEUE.end_ms]) then return all(RC.ENDED) end
if m[M_QUEUE.open] ~= '1' then return all(RC.CLOSED) end
-- Sold out: nobody waits for nothing. (A segmented activity's stock is in its
-- segments, out of this slot: the service's sold-out verdict answers there.)
if not m[M_QUEUE.segments] and redis.call('GET', KEYS[K_QUEUE.stock]) == '0' then
  return all(RC.SOLD_OUT)
end
local rate, ttl_ms = tonumber(m[M_QUEUE.wr_rate]), tonumber(m[M_QUEUE.wr_ttl]) * 1000
local seed = m[M_QUEUE.wr_seed]
local len = redis.call('ZCARD', KEYS[K_QUEUE.wr_q])
local chg = ch_gate(m[M_QUEUE.ch], m[M_QUEUE.ch_floor])

-- The challenge of buyer i entering the queue: its refusal, or nil (spent).
local function ch_entry_refused(i)
  if not chg then return nil end
  local k = #KEYS > K_QUEUE.N and KEYS[K_QUEUE.N + i] or nil
  local why, exp = ch_refused(chg, ARGV[A_JOIN.N * i + (B0 + A_JOIN.ticket)], k, now)
  if why then return why end
  ch_spend(chg, k, exp)
  return nil
end

local function valid(op, u)
  return (op == 'j' or op == 'p') and u and #u <= 20 and string.find(u, '^[1-9]%d*$')
end

-- A join the line refuses (nil: none): an unregistered buyer when the sale
-- takes registrations, a new buyer while joins are refused (a buyer in the
-- line may join again). Writes nothing.
local function join_refused(u)
  if m[M_QUEUE.reg_start] and redis.call('SISMEMBER', KEYS[K_QUEUE.reg], u) == 0 then
    -- a set that vanished is the recovery's to restore (lib/reg.lua)
    return reg_lost(KEYS[K_QUEUE.meta], KEYS[K_QUEUE.reg]) and RC.RECOVERING or RC.NOT_REGISTERED
  end
  if wr_on(m[M_QUEUE.wr_nojoin]) and not redis.call('ZSCORE', KEYS[K_QUEUE.wr_q], u) then
    return RC.JOINS_CLOSED
  end
  return nil
end

if now < start then
  -- Before the start: a joiner's place is drawn, not known (more may join).
  out[5] = start - now
  for i = 1, n do
    local op, u = ARGV[A_JOIN.N * i + (B0 + A_JOIN.op)], ARGV[A_JOIN.N * i + (B0 + A_JOIN.user)]
    local rc = RC.Q_WAITING
    if not valid(op, u) then
      rc = RC.BAD_ARGUMENT
    elseif op == 'j' then
      rc = join_refused(u) or rc
    end
    if rc ~= RC.Q_WAITING then
      -- refused, nothing written
    elseif op == 'j' then
      -- NX: joining again keeps the draw (it is a function of the user anyway);
      -- only entering the queue takes a challenge
      local why = not redis.call('ZSCORE', KEYS[K_QUEUE.wr_q], u) and ch_entry_refused(i)
      local draw = tonumber(string.sub(redis.sha1hex(seed .. ':q:' .. u), 1, 13), 16)
      if why then
        rc = why
      else
        len = len + redis.call('ZADD', KEYS[K_QUEUE.wr_q], 'NX', draw, u)
      end
    elseif not redis.call('ZSCORE', KEYS[K_QUEUE.wr_q], u) then
      rc = RC.NOT_IN_QUEUE
    end
    answer(i, rc, 0, 0, '', 0)
  end
  out[2] = len
  return out
end

local base = tonumber(m[M_QUEUE.wr_base] or '') or 0
local base_ms = tonumber(m[M_QUEUE.wr_base_ms] or '') or start
local frozen = wr_on(m[M_QUEUE.wr_hold])
if frozen and base_ms < now then
  -- paused (queue_control.lua rebased the count at the pause): it stands
  -- still, so the resume does not hand out the pause's passes at once
  base_ms = now
  redis.call('HSET', KEYS[K_QUEUE.meta], 'wr_base_ms', base_ms)
end

-- Places holding a pass now. Never more than the queue: when the pace would
-- run ahead, the count is rebased to the queue's length at now.
local function issued()
  local a = base + math.floor((now - base_ms) * rate / 1000)
  if a <= len then return a end
  base, base_ms = len, now
  redis.call('HSET', KEYS[K_QUEUE.meta], 'wr_base', base, 'wr_base_ms', base_ms)
  return len
end

-- ---- seats (docs/waiting-room.md, "A room that never jams") ----
local reach = tonumber(m[M_QUEUE.wr_reach] or '') or 0
local returned, expired = 0, 0

-- The seat of u, whose deadline passed unspent, goes back to the pace:
-- the buyer's pass (handed out or not) is expired, one more place holds one
-- (base and the counts are written once, at the end of the call).
local function seat_back(u, deadline)
  local pv = redis.call('HGET', KEYS[K_QUEUE.wr_pass], u)
  if not pv or string.find(pv, '^%d+$') then
    redis.call('HSET', KEYS[K_QUEUE.wr_pass], u, 'x' .. (pv or string.format('%.0f', deadline)))
    if pv then expired = expired + 1 end
    returned = returned + 1
    base = base + 1
  end
  redis.call('ZREM', KEYS[K_QUEUE.wr_held], u)
end

-- Seats whose deadline passed go back (at most 512 a call: the rest at the
-- next, or when their buyer asks); places the pace reached since the last
-- call get a seat with a deadline (at most 512 a call: a buyer asking
-- before gets one with the pass).
local function settle_seats()
  local gone = redis.call('ZRANGEBYSCORE', KEYS[K_QUEUE.wr_held], '-inf', now, 'WITHSCORES',
                          'LIMIT', 0, 512)
  for j = 1, #gone, 2 do seat_back(gone[j], tonumber(gone[j + 1])) end
  -- the count as it stands (issued() would rebase an idle room before this
  -- call's joiners are in)
  local upto = pace_at(base, base_ms, rate, now, len)
  if upto > reach then
    local last = math.min(upto, reach + 512)
    local us = redis.call('ZRANGE', KEYS[K_QUEUE.wr_q], reach, last - 1)
    local deadline = string.format('%.0f', now + ttl_ms)
    for j = 1, #us do
      if redis.call('HEXISTS', KEYS[K_QUEUE.wr_pass], us[j]) == 0 then
        redis.call('ZADD', KEYS[K_QUEUE.wr_held], 'NX', deadline, us[j])
      end
    end
    reach = last
  end
  if reach ~= (tonumber(m[M_QUEUE.wr_reach] or '') or 0) then
    redis.call('HSET', KEYS[K_QUEUE.meta], 'wr_reach', reach)
  end
end

-- A place before `reach` left the queue: the places behind move up.
local function left_at(rank)
  if rank < reach then
    reach = reach - 1
    redis.call('HSET', KEYS[K_QUEUE.meta], 'wr_reach', reach)
  end
end

-- A place at the back: behind everyone so far (the counter only grows).
local function join_back(u)
  local seq = redis.call('HINCRBY', KEYS[K_QUEUE.meta], 'wr_seq', 1)
  redis.call('ZADD', KEYS[K_QUEUE.wr_q], TWO52 + seq, u)
  len = len + 1
  return len - 1
end

-- One buyer (the i-th) after the start: rc, place, expiry, pass, events.
local function decide(op, u, i)
  local rank = redis.call('ZRANK', KEYS[K_QUEUE.wr_q], u)
  if not rank then
    if op ~= 'j' then return RC.NOT_IN_QUEUE, 0, 0, '', 0 end
    local no = join_refused(u) or ch_entry_refused(i)
    if no then return no, 0, 0, '', 0 end
    rank = join_back(u)
  end
  if rank >= issued() then return RC.Q_WAITING, rank + 1, 0, '', 0 end
  local pv = redis.call('HGET', KEYS[K_QUEUE.wr_pass], u)
  local ev = 0
  if not pv then
    local dl = tonumber(redis.call('ZSCORE', KEYS[K_QUEUE.wr_held], u) or '')
    if frozen or not dl or dl > now then
      -- the pass is handed out now: its lifetime starts when the buyer has
      -- it, and so does the seat's
      local exp = string.format('%.0f', now + ttl_ms)
      redis.call('HSET', KEYS[K_QUEUE.wr_pass], u, exp)
      redis.call('ZADD', KEYS[K_QUEUE.wr_held], exp, u)
      redis.call('HINCRBY', KEYS[K_QUEUE.meta], 'wr_issued', 1)
      return RC.Q_ADMITTED, rank + 1, tonumber(exp), wr_pass(seed, aid, u, exp), 1
    end
    -- reached, never fetched, and its seat's time is up
    seat_back(u, dl)
    pv, ev = redis.call('HGET', KEYS[K_QUEUE.wr_pass], u), 2
  end
  local mark, e = string.match(pv, '^(%a?)(%d+)$')
  if mark == 's' then return RC.Q_USED, rank + 1, 0, '', 0 end
  -- everyone queued: passes out keep going (queue_control.lua extends them
  -- by the hold when it ends)
  if mark == '' and (tonumber(e) > now or m[M_QUEUE.wr_hold] == 'all') then
    return RC.Q_ADMITTED, rank + 1, tonumber(e), wr_pass(seed, aid, u, e), 0
  end
  -- paused: nothing goes back to the pace and nobody rejoins until it
  -- resumes (the expiry is settled then)
  if frozen then return RC.Q_EXPIRED, rank + 1, 0, '', 0 end
  if mark == '' then
    seat_back(u, tonumber(e))
    ev = 2
  end
  if op ~= 'j' then return RC.Q_EXPIRED, rank + 1, 0, '', ev end
  -- Joining with an expired pass: a new place at the back. The old place was
  -- one of the issued ones, so one fewer place holds a pass from now on.
  redis.call('ZREM', KEYS[K_QUEUE.wr_q], u)
  redis.call('HDEL', KEYS[K_QUEUE.wr_pass], u)
  redis.call('ZREM', KEYS[K_QUEUE.wr_held], u)
  left_at(rank)
  len = len - 1
  base = base - 1
  redis.call('HSET', KEYS[K_QUEUE.meta], 'wr_base', base, 'wr_base_ms', base_ms)
  local rc, place, exp, pass, ev2 = decide(op, u, i)
  return rc, place, exp, pass, ev + ev2
end

if not frozen then settle_seats() end

for i = 1, n do
  local op, u = ARGV[A_JOIN.N * i + (B0 + A_JOIN.op)], ARGV[A_JOIN.N * i + (B0 + A_JOIN.user)]
  if valid(op, u) then
    answer(i, decide(op, u, i))
  else
    answer(i, RC.BAD_ARGUMENT, 0, 0, '', 0)
  end
end
out[2] = len
out[3] = issued()
out[7], out[8] = returned, expired
if returned > 0 then
  redis.call('HSET', KEYS[K_QUEUE.meta], 'wr_base', base)
  redis.call('HINCRBY', KEYS[K_QUEUE.meta], 'wr_returned', returned)
  if expired > 0 then redis.call('HINCRBY', KEYS[K_QUEUE.meta], 'wr_expired', expired) end
end
return out
