-- lib/gcra.lua - the rate limiters (docs/rate-limit.md), shared by the
-- admission (lib/admit.lua) and the registration (register.lua).
--
-- GCRA, one key per user and one per
-- client IP, in the key set's hash tag: sk:{a<ID>}:rl:u:<user>,
-- sk:{a<ID>}:rl:ip:<ip>. A key holds the theoretical arrival time (TAT,
-- unix microseconds) and expires when the bucket is full again, so idle
-- limiters cost no memory; stock keys never expire. Cost: nothing when
-- off; a GET and, when allowed, a SET PX per limiter and purchase when on.
--#include "lib/time.lua"
local RL_SLACK_US = 5000

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
