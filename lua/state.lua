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
local m = redis.call('HMGET', KEYS[1], 'open', 'initial', 'released', 'limit', 'max_qty',
                     'start_ms', 'end_ms', 'reconcile_drift', 'reconcile_ms', 'xin', 'xout',
                     'fence', 'fence_ms', 'fence_why', 'lost', 'oversold', 'adm', 'epoch')
local stock = redis.call('GET', KEYS[2])
local guard = {m[12] or '', tonumber(m[13] or '0'), m[14] or '', tonumber(m[15] or '0'),
               tonumber(m[16] or '0'), tonumber(m[17] or '0'), tonumber(m[18] or '0')}
if not m[2] or not stock then
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, -1, 0, 0, 0, unpack(guard)}
end
local xlen = redis.call('XLEN', KEYS[4])
local backlog = backlog_of(KEYS[4], 'seckill')[1]
local held = 0
local b = redis.call('HVALS', KEYS[3])
for i = 1, #b do held = held + tonumber(b[i]) end
return {1, m[1] == '1' and 1 or 0, tonumber(m[2]), tonumber(stock), tonumber(m[3] or '0'),
        tonumber(m[4]), tonumber(m[5]), tonumber(m[6]), tonumber(m[7]), #b, held,
        xlen, tonumber(m[8] or '-1'), tonumber(m[9] or '0'), backlog, redis.call('XLEN', KEYS[5]),
        tonumber(m[10] or '0'), tonumber(m[11] or '0'), unpack(guard)}
