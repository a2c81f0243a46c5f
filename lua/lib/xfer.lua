-- lib/xfer.lua - the receiving half of a stock transfer between segments
-- (docs/segments.md), shared by purchase_batch.lua and xfer_in.lua.
-- The transfer id is recorded in the xin hash first, so a transfer is
-- applied once however often it is replayed (the borrower's call and a
-- reconcile roll-forward may race). Returns 1 when applied now, 0 when it
-- was applied before.
local function xfer_in(meta, stock, xin, id, qty)
  if redis.call('HSETNX', xin, id, qty) == 0 then return 0 end
  redis.call('INCRBY', stock, qty)
  redis.call('HINCRBY', meta, 'xin', qty)
  return 1
end
