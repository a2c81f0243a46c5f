-- lib/oid.lua - the shapes of an order id (src/engine/order_id.h), for the
-- scripts that take one: "<label>-<ms>-<seq>-<branch>" (8 lowercase hex
-- digits of the admitting server's replication id), followed by "-<i>"
-- (the order's place in a stream entry of several, 0..1023) or not, or,
-- made before branches, "<label>-<ms>-<seq>".
local function oid_ok(label, oid)
  if type(oid) ~= 'string' or #oid > 63 then return false end
  local p = '^' .. string.gsub(label, '%.', '%%.') .. '%-[0-9]+%-[0-9]+'
  if string.match(oid, p .. '$') then return true end
  local i = string.match(oid, p .. '%-' .. string.rep('[0-9a-f]', 8) .. '(.*)$')
  if i == nil then return false end
  if i == '' then return true end
  i = string.match(i, '^%-(%d+)$')
  return i ~= nil and #i <= 4 and (i == '0' or string.sub(i, 1, 1) ~= '0') and tonumber(i) < 1024
end
