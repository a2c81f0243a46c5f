-- queue.lua - the waiting room of one activity (docs/waiting-room.md):
-- joins and polls of several buyers, decided in one call on Redis's clock.
-- KEYS: meta q pass stock (the activity's base key set {a<ID>}: the queue
--       lives there with or without segments), then, when the call carries
--       challenge tickets, per buyer its challenge's spent key
--       (lib/challenge.lua)
-- ARGV: activity id, then per buyer: op ('j' join, 'p' poll), user id,
--       challenge ticket ('' none; a join that enters the queue needs one
--       when the activity asks a challenge: docs/challenges.md)
-- Returns {rc, queue length, passes issued (the first that many places hold
-- one), passes per second, ms until the start (0 once started), segments
-- (1: none), then per buyer: rc (Q_WAITING, Q_ADMITTED, Q_USED, Q_EXPIRED
-- or a refusal: RECOVERING while the key set is fenced), place (1 is the front; 0 before the start, when nothing is
-- drawn yet), pass expiry (unix ms, 0: none), pass ('' none), events (1: a
-- pass was handed out by this call, 2: this call found the pass expired)}.
-- rc is not OK when the whole call is refused (every buyer then has it). A
-- malformed call is answered the head alone, rc BAD_ARGUMENT (lib/args.lua).
--
-- The queue is a sorted set. Before the start a joiner's score is a keyed
-- pseudo-random number of (seed, user) below 2^52 (the draw); from the
-- start on it is 2^52 + an arrival counter, so later joiners are behind
-- every early one in arrival order, and the early ones' order is fixed the
-- moment the start passes (nobody can join their group any more). The
-- first `issued` places hold passes: issued grows at wr_rate per second
-- from wr_base at wr_base_ms (the start at first), and when it would run
-- ahead of the queue it is rebased to the queue's length instead, so no
-- passes are banked for a burst of late joiners.
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/pass.lua"
--#include "lib/challenge.lua"
local TWO52 = 4503599627370496
local aid, n = ARGV[1] or '', (#ARGV - 1) / 3
if not digits(aid, 15) or n < 1 or n ~= math.floor(n) or (#KEYS ~= 4 and #KEYS ~= 4 + n) then
  return bad_args(0, 0, 0, 0, 0)
end
local m = redis.call('HMGET', KEYS[1], 'open', 'start_ms', 'end_ms', 'wr_rate', 'wr_ttl',
                     'wr_seed', 'wr_base', 'wr_base_ms', 'segments', 'fence', 'fence_ms', 'ch')
local now = now_ms()
local out = {RC.OK, 0, 0, tonumber(m[4] or '') or 0, 0, tonumber(m[9] or '') or 1}

local function answer(i, rc, place, exp, pass, ev)
  local b = 6 + 5 * (i - 1)
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
if m[10] then
  local start, rate = tonumber(m[2] or ''), tonumber(m[4] or '')
  if start and rate and m[6] and now >= start then
    local base, base_ms = tonumber(m[7] or '') or 0, tonumber(m[8] or '') or start
    local upto = math.max(base_ms, math.min(tonumber(m[11] or '') or now, now))
    local a = base + math.floor((upto - base_ms) * rate / 1000)
    local len = redis.call('ZCARD', KEYS[2])
    if a > len then a = len end
    redis.call('HSET', KEYS[1], 'wr_base', a, 'wr_base_ms', now)
  end
  return all(RC.RECOVERING)
end
if not m[2] or not m[3] then return all(RC.UNKNOWN_ACTIVITY) end
if not m[4] or not m[5] or not m[6] then return all(RC.NO_WAITING_ROOM) end
local start = tonumber(m[2])
if now >= tonumber(m[3]) then return all(RC.ENDED) end
if m[1] ~= '1' then return all(RC.CLOSED) end
-- Sold out: nobody waits for nothing. (A segmented activity's stock is in its
-- segments, out of this slot: the service's sold-out verdict answers there.)
if not m[9] and redis.call('GET', KEYS[4]) == '0' then return all(RC.SOLD_OUT) end
local rate, ttl_ms, seed = tonumber(m[4]), tonumber(m[5]) * 1000, m[6]
local len = redis.call('ZCARD', KEYS[2])
local chg = ch_gate(m[12])

-- The challenge of buyer i entering the queue: its refusal, or nil (spent).
local function ch_entry_refused(i)
  if not chg then return nil end
  local k = #KEYS > 4 and KEYS[4 + i] or nil
  local why, exp = ch_refused(chg, ARGV[3 * i + 1], k, now)
  if why then return why end
  ch_spend(chg, k, exp)
  return nil
end

local function valid(op, u)
  return (op == 'j' or op == 'p') and u and #u <= 20 and string.find(u, '^[1-9]%d*$')
end

if now < start then
  -- Before the start: a joiner's place is drawn, not known (more may join).
  out[5] = start - now
  for i = 1, n do
    local op, u = ARGV[3 * i - 1], ARGV[3 * i]
    local rc = RC.Q_WAITING
    if not valid(op, u) then
      rc = RC.BAD_ARGUMENT
    elseif op == 'j' then
      -- NX: joining again keeps the draw (it is a function of the user anyway);
      -- only entering the queue takes a challenge
      local why = not redis.call('ZSCORE', KEYS[2], u) and ch_entry_refused(i)
      local draw = tonumber(string.sub(redis.sha1hex(seed .. ':q:' .. u), 1, 13), 16)
      if why then rc = why else len = len + redis.call('ZADD', KEYS[2], 'NX', draw, u) end
    elseif not redis.call('ZSCORE', KEYS[2], u) then
      rc = RC.NOT_IN_QUEUE
    end
    answer(i, rc, 0, 0, '', 0)
  end
  out[2] = len
  return out
end

local base = tonumber(m[7] or '') or 0
local base_ms = tonumber(m[8] or '') or start

-- Places holding a pass now. Never more than the queue: when the pace would
-- run ahead, the count is rebased to the queue's length at now.
local function issued()
  local a = base + math.floor((now - base_ms) * rate / 1000)
  if a <= len then return a end
  base, base_ms = len, now
  redis.call('HSET', KEYS[1], 'wr_base', base, 'wr_base_ms', base_ms)
  return len
end

-- A place at the back: behind everyone so far (the counter only grows).
local function join_back(u)
  local seq = redis.call('HINCRBY', KEYS[1], 'wr_seq', 1)
  redis.call('ZADD', KEYS[2], TWO52 + seq, u)
  len = len + 1
  return len - 1
end

-- One buyer (the i-th) after the start: rc, place, expiry, pass, events.
local function decide(op, u, i)
  local rank = redis.call('ZRANK', KEYS[2], u)
  if not rank then
    if op ~= 'j' then return RC.NOT_IN_QUEUE, 0, 0, '', 0 end
    local why = ch_entry_refused(i)
    if why then return why, 0, 0, '', 0 end
    rank = join_back(u)
  end
  if rank >= issued() then return RC.Q_WAITING, rank + 1, 0, '', 0 end
  local pv = redis.call('HGET', KEYS[3], u)
  if not pv then
    -- the pass is handed out now: its lifetime starts when the buyer has it
    local exp = string.format('%.0f', now + ttl_ms)
    redis.call('HSET', KEYS[3], u, exp)
    redis.call('HINCRBY', KEYS[1], 'wr_issued', 1)
    return RC.Q_ADMITTED, rank + 1, tonumber(exp), wr_pass(seed, aid, u, exp), 1
  end
  local mark, e = string.match(pv, '^(%a?)(%d+)$')
  if mark == 's' then return RC.Q_USED, rank + 1, 0, '', 0 end
  if mark == '' and tonumber(e) > now then
    return RC.Q_ADMITTED, rank + 1, tonumber(e), wr_pass(seed, aid, u, e), 0
  end
  local ev = 0
  if mark == '' then
    redis.call('HSET', KEYS[3], u, 'x' .. e)
    redis.call('HINCRBY', KEYS[1], 'wr_expired', 1)
    ev = 2
  end
  if op ~= 'j' then return RC.Q_EXPIRED, rank + 1, 0, '', ev end
  -- Joining with an expired pass: a new place at the back. The old place was
  -- one of the issued ones, so one fewer place holds a pass from now on.
  redis.call('ZREM', KEYS[2], u)
  redis.call('HDEL', KEYS[3], u)
  len = len - 1
  base = base - 1
  redis.call('HSET', KEYS[1], 'wr_base', base, 'wr_base_ms', base_ms)
  local rc, place, exp, pass, ev2 = decide(op, u, i)
  return rc, place, exp, pass, ev + ev2
end

for i = 1, n do
  local op, u = ARGV[3 * i - 1], ARGV[3 * i]
  if valid(op, u) then
    answer(i, decide(op, u, i))
  else
    answer(i, RC.BAD_ARGUMENT, 0, 0, '', 0)
  end
end
out[2] = len
out[3] = issued()
return out
