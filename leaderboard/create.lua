-- create stores a board definition unless the id exists, and registers the id in the board list of its slot,
-- in one step. KEYS[2]: the board list of the board's slot (see Store.registryKey). ARGV: definition JSON, id.
-- Reply: 'created', 'same' (the same definition exists) or an LB_CONFLICT error; LB_DELETING <token> while a
-- deletion of the id is still being purged (see delete.lua).
local gone = rcall('GET', base .. 'del')
if gone then return redis.error_reply('LB_DELETING ' .. gone) end
local def = base .. 'def'
local cur = rcall('GET', def)
if cur and cur ~= ARGV[1] then
  return redis.error_reply('LB_CONFLICT a board with this id exists with a different definition')
end
rcall('SADD', KEYS[2], ARGV[2])
if cur then return 'same' end
rcall('SET', def, ARGV[1])
return 'created'
