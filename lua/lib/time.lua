-- lib/time.lua - Redis's clock (TIME), for every script that needs the time
-- (inlined at build time by tools/gen_scripts.c, once per script).
--
-- TIME is read at most once per call and every reading below is of that
-- one instant: a call that checks the window and then fences, or stamps a
-- transfer, sees a single time, and pays one TIME however many it asks.
local time_reply = nil

local function time_now()
  if not time_reply then time_reply = redis.call('TIME') end
  return time_reply
end

-- Unix milliseconds (windows, fences, the waiting room's pace).
local function now_ms()
  local t = time_now()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Unix microseconds (the rate limiters' arrival times).
local function now_us()
  local t = time_now()
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- A key set's new incarnation (meta `epoch`, docs/recovery.md): the unix
-- microseconds as text, "<seconds><microseconds, 6 digits>".
local function epoch_now()
  local t = time_now()
  return t[1] .. string.format('%06d', tonumber(t[2]))
end
