-- state.lua - one consistent snapshot of an activity's live state.
-- KEYS: meta stock buyers orders dlq
-- Returns {exists, open, initial, stock, released, limit, max_qty, start_ms,
--          end_ms, buyers, held, stream_len, reconcile_drift (-1: never),
--          reconcile_ms, backlog (entries the order worker has not acknowledged:
--          pending + lag of group "seckill"; -1 when unknown), dlq length,
--          xin, xout (units a segment received from and lent to others),
--          then the rollback guard (docs/recovery.md): fence ('' when none),
--          fence_ms, fence_why, lost (acknowledged admissions counted lost),
--          oversold (units sold twice), adm (admissions), epoch}
-- The guard's fields come with a key set whose other keys are gone too (a
-- fence-only meta while it is rebuilt).
-- flags: no-writes
--#include "lib/backlog.lua"
local m = redis.call('HMGET', KEYS[K_STATE.meta], M_STATE.FIELDS)
local stock = redis.call('GET', KEYS[K_STATE.stock])
local guard = {m[M_STATE.fence] or '', tonumber(m[M_STATE.fence_ms] or '0'),
               m[M_STATE.fence_why] or '', tonumber(m[M_STATE.lost] or '0'),
               tonumber(m[M_STATE.oversold] or '0'), tonumber(m[M_STATE.adm] or '0'),
               tonumber(m[M_STATE.epoch] or '0')}
if not m[M_STATE.initial] or not stock then
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, -1, 0, 0, 0, unpack(guard)}
end
local xlen = redis.call('XLEN', KEYS[K_STATE.orders])
local backlog = backlog_of(KEYS[K_STATE.orders], NAME.WORKER_GROUP)[1]
local held = 0
local b = redis.call('HVALS', KEYS[K_STATE.buyers])
for i = 1, #b do held = held + tonumber(b[i]) end
return {1, m[M_STATE.open] == '1' and 1 or 0, tonumber(m[M_STATE.initial]), tonumber(stock),
        tonumber(m[M_STATE.released] or '0'), tonumber(m[M_STATE.limit]),
        tonumber(m[M_STATE.max_qty]), tonumber(m[M_STATE.start_ms]), tonumber(m[M_STATE.end_ms]),
        #b, held, xlen, tonumber(m[M_STATE.reconcile_drift] or '-1'),
        tonumber(m[M_STATE.reconcile_ms] or '0'), backlog, redis.call('XLEN', KEYS[K_STATE.dlq]),
        tonumber(m[M_STATE.xin] or '0'), tonumber(m[M_STATE.xout] or '0'), unpack(guard)}
