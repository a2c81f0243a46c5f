-- lib/reg.lua - the registrants' set (sk:{a<ID>}:reg, docs/fairness.md)
-- as the scripts that read it tell a buyer who never registered from a set
-- that vanished (an operator's DEL, an eviction): bit 8 of meta `keys`
-- (lib/admit.lua's keys_lost) says the set must exist, set with its first
-- member (register.lua) and by the recovery when it writes the database's
-- registrants back. A lost set is a recovery's to restore, never a
-- not_registered answer.

-- True when the set at reg is gone while meta says it must exist. One HGET
-- and one EXISTS, only where a buyer was not found in it.
local function reg_lost(meta, reg)
  local must = tonumber(redis.call('HGET', meta, 'keys') or '0') or 0
  return must % 16 >= 8 and redis.call('EXISTS', reg) == 0
end

-- Marks the set as one that must exist from now on (its first member).
local function reg_must_exist(meta)
  local must = tonumber(redis.call('HGET', meta, 'keys') or '0') or 0
  if must % 16 < 8 then redis.call('HSET', meta, 'keys', must + 8) end
end
