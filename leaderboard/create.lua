-- create stores a board definition unless the id exists. ARGV: definition JSON.
-- Reply: 'created', 'same' (the same definition exists) or an LB_CONFLICT error.
local def = base .. 'def'
local cur = redis.call('GET', def)
if not cur then
  redis.call('SET', def, ARGV[1])
  return 'created'
end
if cur == ARGV[1] then return 'same' end
return redis.error_reply('LB_CONFLICT a board with this id exists with a different definition')
