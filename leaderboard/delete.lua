-- delete is the atomic part of deleting a board: it removes the definition (every other script then refuses the
-- board with LB_NOT_FOUND), takes the id off the board list of its slot, drops the watch key, leaves a tombstone
-- (the del key, holding ARGV[2], a token unique to this deletion) and announces the deletion on the board's
-- channel. The remaining keys are purged afterwards in bounded batches (purge.lua) while the tombstone stays;
-- create.lua refuses the id until the tombstone is gone. KEYS[2]: the board list of the board's slot. ARGV: id,
-- token, publish command ('' for none), channel, deletion notice (payload).
-- Reply: {'deleted', token}; {'deleting', token} when an earlier deletion of the board is still being purged;
-- 'none' when there is no such board.
local tomb = base .. K.tomb
if rcall('EXISTS', base .. K.def) == 0 then
  local t = rcall('GET', tomb)
  if t then return { 'deleting', t } end
  return 'none'
end
rcall('DEL', base .. K.def, base .. K.watch)
rcall('SREM', KEYS[2], ARGV[1])
rcall('SET', tomb, ARGV[2])
if ARGV[3] ~= '' then rcall(ARGV[3], ARGV[4], ARGV[5]) end
return { 'deleted', ARGV[2] }
