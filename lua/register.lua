-- register.lua - pre-registration (预约) and a registrant's view of the
-- draw (docs/fairness.md).
-- KEYS: meta reg draw wr:spent stock rl_user [rl_ip] (the activity's key set)
--       [the challenge's spent key, when the call carries a ticket]
-- ARGV: op ('r' register, 's' status), user id, then the call's rate limits
--       u_rate u_burst ip_rate ip_burst ('0' = off; the activity's own
--       per-user limit in meta wins, as for purchases) and the client IP
--       ('' none), the challenge ticket ('' none: lib/challenge.lua; a new
--       registrant needs one when the activity asks a challenge)
-- Returns {rc, registered (0/1), added by this call (0/1), registrants,
--          retry after ms (RATE_LIMITED), place in the draw (0: none),
--          pass expiry (unix ms, 0: none), pass ('' none), box start (unix
--          ms), winners so far (places holding or having held a right),
--          registrants in the draw (0: not drawn yet)}
-- rc: register: REGISTERED, REG_NOT_OPEN, REG_CLOSED, RATE_LIMITED, the
-- challenge's refusals (CHALLENGE_REQUIRED, CAPTCHA_REQUIRED,
-- CHALLENGE_INVALID, CHALLENGE_EXPIRED, CHALLENGE_REPLAYED); status:
-- NOT_REGISTERED, REGISTERED (no draw, or not drawn yet), Q_ADMITTED (a
-- right now: the pass), Q_WAITING (later in the draw's order), Q_USED,
-- Q_EXPIRED (the box passed unused), SOLD_OUT; either: UNKNOWN_ACTIVITY,
-- NO_REGISTRATION, RECOVERING (fenced). A malformed call: BAD_ARGUMENT.
--
-- Registration is idempotent (SADD); it is charged to the buyer's and the
-- client IP's rate limiters like a purchase (lib/gcra.lua), not the status.
-- Becoming a registrant spends a challenge when the activity asks one (meta
-- `ch`), as entering the queue does; a registrant registering again needs
-- none. A refused call writes nothing (no token, no spent key).
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/gcra.lua"
--#include "lib/pass.lua"
--#include "lib/draw.lua"
--#include "lib/challenge.lua"
--#include "lib/reg.lua"
local op, u = ARGV[A_REGISTER.op] or '', ARGV[A_REGISTER.user] or ''
local ip, ticket = ARGV[A_REGISTER.ip] or '', ARGV[A_REGISTER.ticket] or ''
local function out_of(rc) return {rc, 0, 0, 0, 0, 0, 0, '', 0, 0, 0} end
-- the KEYS before the challenge's spent key (rl_ip: only with a client IP)
local nbase = ip ~= '' and K_REGISTER.rl_ip or K_REGISTER.rl_user
local chk = nbase + 1
if (op ~= 'r' and op ~= 's') or not digits(u, 20) or not string.find(u, '^[1-9]')
   or #ip > 45 or not string.find(ip, '^[%x:.]*$') or #ticket > 40
   or #KEYS ~= nbase + (ticket ~= '' and 1 or 0) then
  return bad_args(0, 0, 0, 0, 0, 0, '', 0, 0, 0)
end
for i = A_REGISTER.u_rate, A_REGISTER.ip_burst do
  if not digits(ARGV[i] or '', 7) then return bad_args(0, 0, 0, 0, 0, 0, '', 0, 0, 0) end
end
local m = redis.call('HMGET', KEYS[K_REGISTER.meta], M_REGISTER.FIELDS)
if m[M_REGISTER.fence] then return out_of(RC.RECOVERING) end
if not m[M_REGISTER.start_ms] or not m[M_REGISTER.end_ms] then
  return out_of(RC.UNKNOWN_ACTIVITY)
end
if not m[M_REGISTER.reg_start] or not m[M_REGISTER.reg_end] then
  return out_of(RC.NO_REGISTRATION)
end
local now = now_ms()
local out = out_of(RC.REGISTERED)

if op == 'r' then
  if now < tonumber(m[M_REGISTER.reg_start]) then out[1] = RC.REG_NOT_OPEN
  elseif now >= tonumber(m[M_REGISTER.reg_end]) then out[1] = RC.REG_CLOSED end
  if out[1] ~= RC.REGISTERED then
    out[4] = redis.call('SCARD', KEYS[K_REGISTER.reg])
    return out
  end
  local member = redis.call('SISMEMBER', KEYS[K_REGISTER.reg], u)
  -- a set that vanished: never a fresh one under the registrants it lost
  if member == 0 and reg_lost(KEYS[K_REGISTER.meta], KEYS[K_REGISTER.reg]) then
    out[1] = RC.RECOVERING
    return out
  end
  -- a new registrant's challenge: checked here, spent with the registration
  local chg, ch_exp = ch_gate(m[M_REGISTER.ch], m[M_REGISTER.ch_floor]), nil
  if chg and member == 0 then
    local why
    why, ch_exp = ch_refused(chg, ticket, KEYS[chk], now)
    if why then
      out[1], out[4] = why, redis.call('SCARD', KEYS[K_REGISTER.reg])
      return out
    end
  end
  -- the rate limiters, as for a purchase: checked both, then charged
  local up, ub
  if m[M_REGISTER.rl_rate] then
    up, ub = rl_params(m[M_REGISTER.rl_rate], m[M_REGISTER.rl_burst])
  else
    up, ub = rl_params(ARGV[A_REGISTER.u_rate], ARGV[A_REGISTER.u_burst])
  end
  local ipp, ipb = rl_params(ARGV[A_REGISTER.ip_rate], ARGV[A_REGISTER.ip_burst])
  local now_u = now_us()
  local wait, ut, it = 0, 0, 0
  if up then wait, ut = gcra(KEYS[K_REGISTER.rl_user], now_u, up, ub) end
  if wait == 0 and ipp and ip ~= '' then
    wait, it = gcra(KEYS[K_REGISTER.rl_ip], now_u, ipp, ipb)
  end
  if wait > 0 then
    out[1], out[5] = RC.RATE_LIMITED, wait
    return out
  end
  if up then gcra_set(KEYS[K_REGISTER.rl_user], now_u, ut) end
  if ipp and ip ~= '' then gcra_set(KEYS[K_REGISTER.rl_ip], now_u, it) end
  if ch_exp then ch_spend(chg, KEYS[chk], ch_exp) end
  out[2], out[3] = 1, redis.call('SADD', KEYS[K_REGISTER.reg], u)
  if out[3] == 1 then reg_must_exist(KEYS[K_REGISTER.meta]) end
  out[4] = redis.call('SCARD', KEYS[K_REGISTER.reg])
  return out
end

-- the status
out[2] = redis.call('SISMEMBER', KEYS[K_REGISTER.reg], u)
out[4] = redis.call('SCARD', KEYS[K_REGISTER.reg])
if out[2] == 0 then
  local lost = reg_lost(KEYS[K_REGISTER.meta], KEYS[K_REGISTER.reg])
  out[1] = lost and RC.RECOVERING or RC.NOT_REGISTERED
  return out
end
local d = draw_state(KEYS[K_REGISTER.meta])
if not d then return out end -- no draw, or not drawn yet
d = draw_advance(KEYS[K_REGISTER.meta], KEYS[K_REGISTER.stock], d, now)
out[10], out[11] = d.dr_to, d.dr_n
local place = tonumber(redis.call('ZSCORE', KEYS[K_REGISTER.draw], u) or '')
if not place then
  out[1] = RC.Q_EXPIRED -- registered too late for the draw (a store restored it)
  return out
end
out[6] = place
if redis.call('HEXISTS', KEYS[K_REGISTER.wr_spent], u) == 1 then
  out[1] = RC.Q_USED
elseif place <= d.dr_from then
  out[1] = RC.Q_EXPIRED
elseif place <= d.dr_to then
  local exp = string.format('%.0f', d.dr_end)
  local pass = wr_pass(m[M_REGISTER.wr_seed], m[M_REGISTER.id], u, exp)
  out[1], out[7], out[8], out[9] = RC.Q_ADMITTED, d.dr_end, pass, d.dr_bstart
elseif tonumber(redis.call('GET', KEYS[K_REGISTER.stock]) or '0') <= 0 then
  out[1] = RC.SOLD_OUT
else
  out[1] = RC.Q_WAITING
end
return out
