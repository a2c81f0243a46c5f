-- lib/pass.lua - queue passes (docs/waiting-room.md), shared by the queue
-- script that hands them out and the admission code that takes them.
--
-- A pass is "<expiry ms>.<tag>": tag = the first 32 hex digits of
-- SHA1(seed ":p:" SHA1(seed ":p:" activity ":" user ":" expiry)), keyed by
-- the activity's secret seed (meta wr_seed), so it names one buyer of one
-- activity and nobody without the seed can make one. The nested hash keeps
-- SHA-1's length extension out (the HMAC shape). Nothing is stored to check
-- one: every key set of the activity (every segment too) has the seed in its
-- meta, and the expiry is compared with Redis's clock. A purchase that
-- spends a pass records it in the key set that admitted it
-- (sk:{tag}:wr:spent, user -> expiry, passed in KEYS by the caller), where
-- the buyer's count lives, so a spent pass cannot buy again.

-- The pass of user for activity aid expiring at exp (decimal text).
local function wr_pass(seed, aid, user, exp)
  local inner = redis.sha1hex(seed .. ':p:' .. aid .. ':' .. user .. ':' .. exp)
  return exp .. '.' .. string.sub(redis.sha1hex(seed .. ':p:' .. inner), 1, 32)
end

-- The waiting room of this key set for one admission call, or nil when the
-- activity has none. seed: meta wr_seed, read by the caller with the rest of
-- meta (false when absent); now: unix ms; spent_key: the key set's
-- wr:spent hash.
local function wr_gate(aid, now, seed, spent_key)
  if not seed then return nil end
  return {seed = seed, aid = aid, now = now, spent_key = spent_key, ok = {}, spent = {}}
end

-- True (and wr.why set) when user u may not buy with pass (nil or '' for
-- none): not this buyer's pass of this activity, expired, or spent.
-- replayed: an Idempotency-Key retry of an accepted purchase, which gets its
-- first answer whatever became of the pass.
local function wr_refused(wr, u, pass, replayed)
  if replayed then return false end
  local e = string.match(pass or '', '^(%d+)%.%x+$')
  if not e or #e > 15 or pass ~= wr_pass(wr.seed, wr.aid, u, e) then
    wr.why = RC.NO_PASS
  elseif tonumber(e) <= wr.now then
    wr.why = RC.PASS_EXPIRED
  elseif wr.spent[u] == e or redis.call('HGET', wr.spent_key, u) == e then
    wr.why = RC.PASS_USED
  else
    wr.ok[u] = e
    return false
  end
  return true
end

-- An admitted purchase of user u spends the pass wr_refused accepted.
local function wr_spend(wr, u)
  local e = wr.ok[u]
  if e and wr.spent[u] ~= e then
    wr.spent[u] = e
    redis.call('HSET', wr.spent_key, u, e)
  end
end
