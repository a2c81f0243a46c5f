-- lib/fence.lua - the fence of a key set (docs/recovery.md), the one writer
-- of it: fence.lua (the order worker's recovery, an operator), the
-- admission call (a caller that saw more than Redis holds, or keys that
-- vanished under it), transfer.lua (a borrower that did) and resume.lua
-- (units sold twice keep it up).
--
-- While meta `fence` is set every purchase of the key set is refused
-- RECOVERING, and it neither lends nor takes stock: fence (why: rollback,
-- vanished, rebuild, manual, oversold), fence_ms (when it was first set),
-- fence_why (text for the operator), fence_adm (the admission count a
-- caller saw: the resume lifts adm above it).
--#include "lib/time.lua"

-- Fences the key set whose meta is `meta` for why (text: fence_why). o
-- (may be nil): seen = the admission count the caller saw (fence_adm);
-- expire_ms = the fence-only meta left on vanished keys expires (the
-- activity may simply have been deleted; the order worker makes it
-- permanent when it rebuilds); persist = it never expires, whatever was
-- set before; relabel = the key set is fenced already and stays dated from
-- then: only the reason changes.
local function fence_set(meta, why, text, o)
  o = o or {}
  if o.relabel then
    redis.call('HSET', meta, 'fence', why, 'fence_why', text)
  elseif o.seen then
    redis.call('HSET', meta, 'fence', why, 'fence_ms', now_ms(), 'fence_why', text,
               'fence_adm', o.seen)
  else
    redis.call('HSET', meta, 'fence', why, 'fence_ms', now_ms(), 'fence_why', text)
  end
  if o.expire_ms then
    redis.call('PEXPIRE', meta, o.expire_ms)
  elseif o.persist then
    redis.call('PERSIST', meta)
  end
end
