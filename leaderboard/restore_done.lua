-- restore_done ends a restore (restore.go): once the board's applied events reach the ledger's head the restorer
-- read last (ARGV[1]), its definition moves from rdef to def and its id onto its slot's board list (KEYS[2]), in
-- one step: the board is readable again, and whole. Its change counter starts a new epoch and a notice on its
-- channel makes every listener read it again (live screens get a snapshot).
-- ARGV: head, id, publish command ('' for none), channel, notice, and 'shard' for shards 1.. of a sharded board
-- (off the board list; shard 0 switches last and announces). Reply: 'done', or the high-water mark when
-- events after it are still to be applied (the restorer applies them and calls again).
local lsq = tonum(rcall('HGET', base .. K.counters, 'lsq')) or 0
if lsq < tonum(ARGV[1]) then return lsq end
if rcall('EXISTS', base .. K.rdef) == 0 then
  if rcall('EXISTS', base .. K.def) == 1 then return 'done' end -- another restorer switched it in
  return redis.error_reply('LB_NOT_FOUND the restore lost its definition')
end
rcall('RENAME', base .. K.rdef, base .. K.def)
if ARGV[6] ~= 'shard' then rcall('SADD', KEYS[2], ARGV[2]) end
local t = rcall('TIME')
rcall('HSET', base .. K.counters, 'ver', 0, 'ep', t[1] .. sformat('%06d', tonum(t[2])))
if ARGV[3] ~= '' then rcall(ARGV[3], ARGV[4], ARGV[5]) end
return 'done'
