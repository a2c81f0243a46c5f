-- reset.lua - readies a fenced key set some of whose keys vanished (an
-- operator's DEL, an eviction: docs/recovery.md) for the replay of every
-- order the database holds: the keys the replay writes back are dropped
-- (buyers, ledger, released, idem: what survived of them was salvaged into
-- the database first), and when its meta still holds the definition the
-- stock starts again at initial + xin - xout under a new epoch (the replay
-- then takes every held order out of it). Its order stream is left alone
-- (entries the worker has not acknowledged, and the stream's id counter).
-- KEYS: meta stock buyers ledger released idem
-- ARGV: none
-- Returns {rc (PREHEATED: reset, stock written; UNKNOWN_ACTIVITY: the meta
--          has no definition, the keys were dropped and rebuild.lua writes
--          it), stock}
--#include "lib/args.lua"
--#include "lib/time.lua"
if #KEYS ~= K_RESET.N or #ARGV > 0 then return bad_args(0) end
local m = redis.call('HMGET', KEYS[K_RESET.meta], M_RESET.FIELDS)
if not m[M_RESET.fence] then return redis.error_reply('reset: the key set is not fenced') end
redis.call('DEL', KEYS[K_RESET.stock], KEYS[K_RESET.buyers], KEYS[K_RESET.ledger],
           KEYS[K_RESET.released], KEYS[K_RESET.idem])
if not m[M_RESET.initial] then return {RC.UNKNOWN_ACTIVITY, 0} end
local stock = tonumber(m[M_RESET.initial]) + tonumber(m[M_RESET.xin] or '0')
              - tonumber(m[M_RESET.xout] or '0')
if stock < 0 then stock = 0 end
redis.call('HSET', KEYS[K_RESET.meta], 'released', 0, 'oversold', 0, 'adm', 0, 'keys', 0, 'epoch',
           epoch_now())
redis.call('PERSIST', KEYS[K_RESET.meta])
redis.call('SET', KEYS[K_RESET.stock], stock)
return {RC.PREHEATED, stock}
