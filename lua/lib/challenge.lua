-- lib/challenge.lua - a solved challenge (proof of work, CAPTCHA:
-- docs/challenges.md) spent once, checked by the admission call (a sale
-- without a waiting room) and the queue's join (one with).
--
-- The serving process checked the signature, the buyer, the activity and
-- the hash before the call (src/engine/challenge.c): a script cannot tell a
-- forged challenge from a real one, and need not. What it adds is what only
-- Redis can say: that the activity asks a challenge at all (meta `ch`,
-- "<minimum bits>:<1 with a CAPTCHA>", written by preheat from the
-- definition), that the challenge has not expired on Redis's clock, and
-- that it was not used before: a spent challenge is a key of its own,
-- sk:{tag}:ch:<id>, living until the challenge expires (passed in KEYS by
-- the caller; keys.c names it), so a replay anywhere in the cluster finds
-- it. A call that carries no challenge carries no such key and costs
-- nothing here.
--
-- The ticket a caller passes for a verified challenge:
-- "<bits>:<captcha 1|0>:<expiry ms>:<made ms>" ('' for none).
--
-- A solution spent before a Redis fault may be forgotten with the key set
-- (a restart empty, a failover to a replica that had not seen the spent
-- key): the recovery's resume writes meta `ch_floor` (Redis's clock, unix
-- ms), and a challenge made before it is refused CHALLENGE_STALE, whether
-- it was spent or not (the page solves a new one). The time it was made
-- comes from the issuing process's clock, inside the signed challenge.

-- v is a meta `ch` value preheat may write.
local function ch_spec_ok(v)
  return type(v) == 'string' and #v <= 8 and string.find(v, '^%d%d?:[01]$') ~= nil
end

-- The activity's challenge from meta `ch` (nil, or '' for none) and
-- `ch_floor` (nil: no recovery yet): {min, cap, floor}.
local function ch_gate(v, floor)
  if not v or v == '' then return nil end
  local mn, cap = string.match(v, '^(%d+):([01])$')
  -- a value no preheat writes asks the most: nothing gets through it
  return {min = tonumber(mn or '') or 99, cap = cap ~= '0', spent = {},
          floor = tonumber(floor or '0') or 0}
end

-- A ticket as the caller sends it, or nil when malformed.
local function ch_ticket(t)
  local bits, cap, exp, made = string.match(t, '^(%d%d?):([01]):(%d+):(%d+)$')
  if not bits or #exp > 15 or #made > 15 then return nil end
  return tonumber(bits), cap == '1', exp, tonumber(made)
end

-- The refusal of ticket t (its spent key k) under gate g at now (unix ms),
-- or nil and the expiry when it may be spent (ch_spend). Writes nothing.
local function ch_refused(g, t, k, now)
  if t == '' then return RC.CHALLENGE_REQUIRED end
  local bits, cap, exp, made = ch_ticket(t)
  if not bits or not k or #k < 8 then return RC.BAD_ARGUMENT end
  -- fewer bits than the sale asks: a challenge of another definition
  if bits < g.min then return RC.CHALLENGE_INVALID end
  if g.cap and not cap then return RC.CAPTCHA_REQUIRED end
  if tonumber(exp) <= now then return RC.CHALLENGE_EXPIRED end
  if made < g.floor then return RC.CHALLENGE_STALE end
  if g.spent[k] or redis.call('EXISTS', k) == 1 then return RC.CHALLENGE_REPLAYED end
  return nil, exp
end

-- Spends the challenge whose key is k until its expiry exp (text, unix ms).
local function ch_spend(g, k, exp)
  g.spent[k] = true
  redis.call('SET', k, '1', 'PXAT', exp)
end
