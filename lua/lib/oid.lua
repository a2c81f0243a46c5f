-- lib/oid.lua - the shapes of an order id (src/engine/order_id.h), for the
-- scripts that take one: "<label>-<ms>-<seq>-<branch>" (8 lowercase hex
-- digits of the admitting server's replication id) or, made before
-- branches, "<label>-<ms>-<seq>".
local function oid_ok(label, oid)
  if type(oid) ~= 'string' or #oid > 63 then return false end
  local p = '^' .. string.gsub(label, '%.', '%%.') .. '%-[0-9]+%-[0-9]+'
  return string.match(oid, p .. '$') ~= nil
         or string.match(oid, p .. '%-' .. string.rep('[0-9a-f]', 8) .. '$') ~= nil
end
