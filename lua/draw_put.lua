-- draw_put.lua - the draw in Redis (docs/fairness.md): the
-- order the order worker or `seckill activity draw` computed from the seed
-- and the registrants (engine/draw.h), and its waves.
-- KEYS: meta draw stock reg (the activity's key set)
-- ARGV: op, then by op:
--   'c'  (check) -> {rc, Redis's now ms, registration end ms, registrants,
--        registrants in the draw (0: not drawn)}
--   'p' place user [place user ...] (put part of the order: ZADD) ->
--        {rc, places in the draw's zset}
--   'f' n drawn_ms seed [wave from to box_start box_end] (finish: the draw
--        is made, once; with a wave, the one the database recorded: a
--        draw restored after Redis lost it) -> the state, as 't'
--   't'  (tick: the next wave when a box is over) -> {rc, n, wave, from,
--        to, box start, box end}
-- rc: OK; RECOVERING (fenced: nothing written); UNKNOWN_ACTIVITY;
-- NO_REGISTRATION (no draw); NOT_STARTED ('f' before registration closed on
-- Redis's clock); REGISTERED ('t' before the draw); BAD_ARGUMENT (malformed,
-- or 'f' with an order of another size than n).
--#include "lib/args.lua"
--#include "lib/time.lua"
--#include "lib/draw.lua"
local op = ARGV[A_DRAW_PUT.op] or ''
local function st(rc, d)
  if not d then return {rc, 0, 0, 0, 0, 0, 0} end
  return {rc, d.dr_n, d.dr_wave, d.dr_from, d.dr_to, d.dr_bstart, d.dr_end}
end
local m = redis.call('HMGET', KEYS[K_DRAW_PUT.meta], M_DRAW.FIELDS)
if #KEYS ~= K_DRAW_PUT.N then return bad_args(0, 0, 0, 0, 0, 0) end
if not m[M_DRAW.start_ms] then return st(RC.UNKNOWN_ACTIVITY) end
if not m[M_DRAW.dr_box] or not m[M_DRAW.reg_end] then return st(RC.NO_REGISTRATION) end
local now = now_ms()
if op == 'c' then
  return {RC.OK, now, tonumber(m[M_DRAW.reg_end]), redis.call('SCARD', KEYS[K_DRAW_PUT.reg]),
          tonumber(m[M_DRAW.dr_n] or '0')}
end
if m[M_DRAW.fence] then return st(RC.RECOVERING) end
if op == 'p' then
  -- the pairs after op: A_DRAW_PLACE.N each
  local b0, np = A_DRAW_PUT.op + 1, A_DRAW_PLACE.N
  if #ARGV < b0 + np - 1 or (#ARGV - b0 + 1) % np ~= 0 then return bad_args(0) end
  local z = {}
  for b = b0, #ARGV, np do
    local place, user = ARGV[b + A_DRAW_PLACE.place], ARGV[b + A_DRAW_PLACE.user]
    if not digits(place, 15) or not digits(user, 20) then return bad_args(0) end
    z[#z + 1] = place
    z[#z + 1] = user
  end
  redis.call('ZADD', KEYS[K_DRAW_PUT.draw], unpack(z))
  return {RC.OK, redis.call('ZCARD', KEYS[K_DRAW_PUT.draw])}
end
if op == 'f' then
  if not digits(ARGV[A_DRAW_PUT.count] or '', 15) or not digits(ARGV[A_DRAW_PUT.drawn_ms] or '', 15)
     or not string.find(ARGV[A_DRAW_PUT.seed] or '', '^%x+$') then
    return bad_args(0, 0, 0, 0, 0, 0)
  end
  local n = tonumber(ARGV[A_DRAW_PUT.count])
  if not m[M_DRAW.dr_n] then
    if now < tonumber(m[M_DRAW.reg_end]) then return st(RC.NOT_STARTED) end
    if redis.call('ZCARD', KEYS[K_DRAW_PUT.draw]) ~= n then return bad_args(0, 0, 0, 0, 0, 0) end
    local w = {}
    if ARGV[A_DRAW_PUT.wave] then
      for i = A_DRAW_PUT.wave, A_DRAW_PUT.wave + A_DRAW_WAVE.N - 1 do
        if not digits(ARGV[i] or '', 15) then return bad_args(0, 0, 0, 0, 0, 0) end
        w[#w + 1] = ARGV[i]
      end
    else
      -- wave 0: the first places, as many as the stock takes, from the start
      local d = {limit = 0, max_qty = 0}
      local lm = redis.call('HMGET', KEYS[K_DRAW_PUT.meta], M_LIMITS.FIELDS)
      d.limit = tonumber(lm[M_LIMITS.limit] or '1') or 1
      d.max_qty = tonumber(lm[M_LIMITS.max_qty] or '1') or 1
      local stock = tonumber(redis.call('GET', KEYS[K_DRAW_PUT.stock]) or '0') or 0
      local b = math.max(now, tonumber(m[M_DRAW.start_ms]))
      w = {'0', '0', math.min(n, draw_rights(d, stock)), string.format('%.0f', b),
           string.format('%.0f', b + tonumber(m[M_DRAW.dr_box]))}
    end
    redis.call('HSET', KEYS[K_DRAW_PUT.meta], 'dr_n', n, 'dr_ms', ARGV[A_DRAW_PUT.drawn_ms],
               'dr_seed', ARGV[A_DRAW_PUT.seed], 'dr_wave', w[1], 'dr_from', w[2], 'dr_to', w[3],
               'dr_bstart', w[4], 'dr_end', w[5])
  end
  return st(RC.OK, draw_state(KEYS[K_DRAW_PUT.meta]))
end
if op ~= 't' then return bad_args(0, 0, 0, 0, 0, 0) end
local d = draw_state(KEYS[K_DRAW_PUT.meta])
if not d then return st(RC.REGISTERED) end
d = draw_advance(KEYS[K_DRAW_PUT.meta], KEYS[K_DRAW_PUT.stock], d, now)
return st(RC.OK, d)
