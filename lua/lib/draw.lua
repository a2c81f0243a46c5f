-- lib/draw.lua - the draw's rights, wave after wave, on Redis's clock
-- (docs/fairness.md), shared by register.lua (a buyer's
-- status) and draw_put.lua (the worker's tick).
--
-- After the draw the activity's meta holds dr_n (registrants in the
-- draw's order, the zset sk:{a<ID>}:draw, user -> place 1..n) and the
-- current wave: dr_wave (0, 1, ...), dr_from < place <= dr_to hold a right
-- to buy during [dr_bstart, dr_end) (a pass bound to the buyer, expiring
-- at dr_end: lib/pass.lua); places up to dr_from had theirs. When a box is
-- over and registrants are left, the next places get rights: as many as
-- the stock left takes, ceil(stock / units one purchase may take), so what
-- the winners of a box did not buy goes to the next in the draw's order
-- until the stock is sold or the list is done. The new box starts when
-- the first call after the old one's end sees it (a buyer's poll or the
-- worker's tick, every second).

local DRAW_FIELDS = {'dr_n', 'dr_box', 'dr_wave', 'dr_from', 'dr_to', 'dr_bstart', 'dr_end',
                     'limit', 'max_qty', 'start_ms'}

-- The draw's state in meta (KEYS meta) as numbers, nil when not drawn.
local function draw_state(meta)
  local v = redis.call('HMGET', meta, unpack(DRAW_FIELDS))
  if not v[1] or not v[2] then return nil end
  local d = {}
  for i, f in ipairs(DRAW_FIELDS) do d[f] = tonumber(v[i] or '') or 0 end
  return d
end

-- How many rights a box gets for stock units left.
local function draw_rights(d, stock)
  local per = math.min(d.limit, d.max_qty)
  if per < 1 then per = 1 end
  return math.ceil(stock / per)
end

-- The next wave when the current box is over (meta, stock: keys): returns
-- d, changed.
local function draw_advance(meta, stock_key, d, now)
  if now < d.dr_end or d.dr_to >= d.dr_n then return d, false end
  local stock = tonumber(redis.call('GET', stock_key) or '0') or 0
  if stock <= 0 then return d, false end
  d.dr_wave = d.dr_wave + 1
  d.dr_from = d.dr_to
  d.dr_to = math.min(d.dr_n, d.dr_to + draw_rights(d, stock))
  d.dr_bstart = now
  d.dr_end = now + d.dr_box
  redis.call('HSET', meta, 'dr_wave', d.dr_wave, 'dr_from', d.dr_from, 'dr_to', d.dr_to,
             'dr_bstart', string.format('%.0f', d.dr_bstart),
             'dr_end', string.format('%.0f', d.dr_end))
  return d, true
end
