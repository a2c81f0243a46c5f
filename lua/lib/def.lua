-- lib/def.lua - the definition of a key set in its meta hash, written by
-- preheat.lua (from the activity, or forced over a live one) and
-- rebuild.lua (from the database, over vanished keys): the one writer of
-- its fields.
--
-- d: id, initial, limit, max_qty, start_ms, end_ms (the sale), seg and
-- seg_of ('' '' when not a segment: docs/segments.md), rl_rate and
-- rl_burst (the activity's own per-user rate limit, numbers; 0 = none:
-- docs/rate-limit.md), wr_rate, wr_ttl, wr_seed (the waiting room, text;
-- wr_seed '' = none: docs/waiting-room.md), ch (the challenge as
-- lib/challenge.lua reads it, '' = none: docs/challenges.md). more: further field, value
-- pairs for the same HSET. clear: the meta may hold an earlier definition,
-- whose rate limit and waiting room go when this one has none.
--
-- Every definition closes the switch (`open` 0). A segment restarts its
-- transfer counts (xin, xout), since its stock is written afresh. One HSET
-- (and with clear at most one HDEL).
local function def_write(meta, d, more, clear)
  local f = {'id', d.id, 'initial', d.initial, 'limit', d.limit, 'max_qty', d.max_qty,
             'start_ms', d.start_ms, 'end_ms', d.end_ms, 'open', '0'}
  local gone = {}
  local function add(t, ...)
    for _, v in ipairs({...}) do t[#t + 1] = v end
  end
  add(f, unpack(more or {}))
  if d.seg ~= '' then add(f, 'seg', d.seg, 'seg_of', d.seg_of, 'xin', 0, 'xout', 0) end
  if d.wr_seed ~= '' then
    add(f, 'wr_rate', d.wr_rate, 'wr_ttl', d.wr_ttl, 'wr_seed', d.wr_seed)
  else
    add(gone, 'wr_rate', 'wr_ttl', 'wr_seed')
  end
  if (d.ch or '') ~= '' then add(f, 'ch', d.ch) else add(gone, 'ch') end
  if d.rl_rate > 0 then
    add(f, 'rl_rate', d.rl_rate, 'rl_burst', d.rl_burst > 0 and d.rl_burst or d.rl_rate)
  else
    add(gone, 'rl_rate', 'rl_burst')
  end
  redis.call('HSET', meta, unpack(f))
  if clear and #gone > 0 then redis.call('HDEL', meta, unpack(gone)) end
end
