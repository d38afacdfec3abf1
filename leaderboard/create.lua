-- create stores a board definition unless the id exists, and registers the id in the board list of its slot,
-- in one step. KEYS[2]: the board list of the board's slot (see Store.registryKey). ARGV: definition JSON, id, and
-- 'shard' for shards 1.. of a sharded board (shard.go), which store the definition but are no board of the list.
-- Reply: 'created', 'same' (the same definition exists) or an LB_CONFLICT error; LB_DELETING <token> while a
-- deletion of the id is still being purged (see delete.lua).
-- Ledgered (the board's first event): a restore keeps the definition in rdef, off the board list, until
-- restore_done.lua switches it in; ARGV[4] is the ledger's key of the board ('' unknown), kept in c.lbk.
local gone = rcall('GET', base .. K.tomb)
if gone then return redis.error_reply('LB_DELETING ' .. gone) end
local restore = LG and LG.restore
local def = base .. (restore and K.rdef or K.def)
local cur = rcall('GET', def)
if LG then
  -- First: keys that hold a board of the ledger since deleted (a failover to a replica that lagged behind the
  -- deletion) are no conflict, and no board this one may be taken for (LB_OTHER: the caller restores it).
  local bad = ledger_check()
  if bad then return bad end
end
if cur and cur ~= ARGV[1] then
  return redis.error_reply('LB_CONFLICT a board with this id exists with a different definition')
end
if LG and ledger_event(1) then
  ledger_save()
  if ARGV[4] and ARGV[4] ~= '' then rcall('HSET', base .. K.counters, 'lbk', ARGV[4]) end
end
if not restore and ARGV[3] ~= 'shard' then rcall('SADD', KEYS[2], ARGV[2]) end
if cur then return 'same' end
rcall('SET', def, ARGV[1])
if not restore then
  -- The board's creation mark (born, see keyCounters): a restore rebuilds the board that was, and sets none.
  local t = rcall('TIME')
  rcall('HSET', base .. K.counters, 'born', t[1] .. '.' .. t[2])
end
return 'created'
