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
if #KEYS ~= 6 or ARGV[1] then return bad_args(0) end
local m = redis.call('HMGET', KEYS[1], M_RESET.FIELDS)
if not m[M_RESET.fence] then return redis.error_reply('reset: the key set is not fenced') end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
if not m[M_RESET.initial] then return {RC.UNKNOWN_ACTIVITY, 0} end
local stock = tonumber(m[M_RESET.initial]) + tonumber(m[M_RESET.xin] or '0')
              - tonumber(m[M_RESET.xout] or '0')
if stock < 0 then stock = 0 end
redis.call('HSET', KEYS[1], 'released', 0, 'oversold', 0, 'adm', 0, 'keys', 0, 'epoch',
           epoch_now())
redis.call('PERSIST', KEYS[1])
redis.call('SET', KEYS[2], stock)
return {RC.PREHEATED, stock}
