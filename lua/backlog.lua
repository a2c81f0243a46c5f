-- backlog.lua - how far the order worker is behind on one order stream: what
-- its group has not acknowledged (delivered and pending, or never
-- delivered), and the age of the oldest such entry, on the server's clock
-- (the clock that made the entry ids).
-- KEYS: orders
-- ARGV: group
-- Returns {backlog (-1: unknown), pending, oldest_ms (the ms part of the
--          oldest entry id not acknowledged, 0: none), now_ms (TIME)}
-- flags: no-writes
--#include "lib/backlog.lua"
--#include "lib/time.lua"
local now = now_ms()
local b = backlog_of(KEYS[K_BACKLOG.orders], ARGV[A_BACKLOG.group])
return {b[1], b[2], b[3], now}
