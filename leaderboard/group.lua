-- group creates consumer group ARGV[1] on the board's outbox (KEYS[2]), reading from the oldest event kept,
-- unless it exists (or the outbox does not). Reply: 1 when it created the group, else 0.
local ok = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0')
if type(ok) == 'table' and ok.err then return 0 end
return 1
