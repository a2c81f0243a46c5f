-- lib/def.lua - the definition of a key set in its meta hash, written by
-- preheat.lua (from the activity, or forced over a live one) and
-- rebuild.lua (from the database, over vanished keys): the one writer of
-- its fields.
--
-- d: id, initial, limit, max_qty, start_ms, end_ms (the sale), seg and
-- seg_of ('' '' when not a segment: docs/segments.md), rl_rate and
-- rl_burst (the activity's own per-user rate limit, numbers; 0 = none:
-- docs/rate-limit.md), wr_rate, wr_ttl, wr_seed (the waiting room, text;
-- wr_seed '' = none: docs/waiting-room.md; a draw's passes' key with
-- wr_rate ''), ch (the challenge as lib/challenge.lua reads it, '' =
-- none: docs/challenges.md), fair (fair_of: registration, the draw's box,
-- the waiting room's controls; nil = none of them). more: further field, value
-- pairs for the same HSET. clear: the meta may hold an earlier definition,
-- whose rate limit and waiting room go when this one has none.
--
-- Every definition closes the switch (`open` 0). A segment restarts its
-- transfer counts (xin, xout), since its stock is written afresh. One HSET
-- (and with clear at most one HDEL).
-- The pre-registration window (start, end ms), a winner's box (ms) and
-- the waiting room's controls (bits: 1 pause, 2 queue everyone, 4 no new
-- joins) from ARGV[i + A_FAIR.reg_start ..] (A_FAIR of
-- src/engine/script_pos.def; '0' = none; C: sk_stock_fair_args), as the
-- meta fields they become (nil = absent); nil when malformed.
local function fair_of(i)
  for k = i, i + A_FAIR.N - 1 do
    if not digits(ARGV[k] or '0', 15) then return nil end
  end
  local function pos(k)
    local v = ARGV[i + k] or '0'
    if tonumber(v) == 0 then return nil end
    return v
  end
  local ctl = tonumber(ARGV[i + A_FAIR.control] or '0')
  if ctl > 7 then return nil end
  local fr = {reg_start = pos(A_FAIR.reg_start), reg_end = pos(A_FAIR.reg_end),
              dr_box = pos(A_FAIR.dr_box)}
  if (fr.reg_start == nil) ~= (fr.reg_end == nil) then return nil end
  if ctl % 4 >= 2 then fr.wr_hold = 'all' elseif ctl % 2 == 1 then fr.wr_hold = 'pause' end
  if ctl >= 4 then fr.wr_nojoin = '1' end
  return fr
end

local function def_write(meta, d, more, clear)
  local f = {'id', d.id, 'initial', d.initial, 'limit', d.limit, 'max_qty', d.max_qty,
             'start_ms', d.start_ms, 'end_ms', d.end_ms, 'open', '0'}
  local gone = {}
  local function add(t, ...)
    for _, v in ipairs({...}) do t[#t + 1] = v end
  end
  add(f, unpack(more or {}))
  if d.seg ~= '' then add(f, 'seg', d.seg, 'seg_of', d.seg_of, 'xin', 0, 'xout', 0) end
  if d.wr_seed ~= '' then add(f, 'wr_seed', d.wr_seed) else add(gone, 'wr_seed') end
  if d.wr_seed ~= '' and d.wr_rate ~= '' then
    add(f, 'wr_rate', d.wr_rate, 'wr_ttl', d.wr_ttl)
  else
    add(gone, 'wr_rate', 'wr_ttl')
  end
  if (d.ch or '') ~= '' then add(f, 'ch', d.ch) else add(gone, 'ch') end
  local fr = d.fair or {}
  local function opt(name, v)
    if v then add(f, name, v) else add(gone, name) end
  end
  opt('reg_start', fr.reg_start)
  opt('reg_end', fr.reg_end)
  opt('dr_box', fr.dr_box)
  opt('wr_hold', fr.wr_hold)
  opt('wr_nojoin', fr.wr_nojoin)
  if d.rl_rate > 0 then
    add(f, 'rl_rate', d.rl_rate, 'rl_burst', d.rl_burst > 0 and d.rl_burst or d.rl_rate)
  else
    add(gone, 'rl_rate', 'rl_burst')
  end
  redis.call('HSET', meta, unpack(f))
  if clear and #gone > 0 then redis.call('HDEL', meta, unpack(gone)) end
end
