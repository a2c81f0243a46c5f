-- lib/args.lua - the one answer to a malformed call, for every script, and
-- the checks of its arguments that scripts share (docs/design.md).
--
-- A call whose KEYS or ARGV are malformed (a caller's bug: C builds them)
-- reads and writes nothing and is answered bad_args(...): the reply array
-- {RC.BAD_ARGUMENT, ...}, the rest of the script's reply head zeroed, so
-- the caller's parser reads it as a refusal like any other. A Lua error is
-- never an answer to bad input (it is a broken precondition, or a bug).
-- Entries of a batch that are malformed are answered BAD_ARGUMENT in their
-- own slots, the rest of the batch is decided.
local function bad_args(...)
  return {RC.BAD_ARGUMENT, ...}
end

-- v is decimal digits, at most max of them (leading zeros allowed).
local function digits(v, max)
  return type(v) == 'string' and #v <= max and string.find(v, '^%d+$') ~= nil
end

-- v is a key set's label: "<ID>" or "<ID>.<seg>".
local function label_ok(v)
  return type(v) == 'string' and #v <= 31
         and (string.find(v, '^%d+$') ~= nil or string.find(v, '^%d+%.%d+$') ~= nil)
end

-- v is a store identity as callers pass it: '' (none) or 16 lowercase hex
-- digits (store.h, SK_STORE_IDENTITY_LEN).
local function store_id_ok(v)
  return v == '' or (type(v) == 'string' and #v == 16 and string.find(v, '^[0-9a-f]+$') ~= nil)
end
