-- arrivals takes n arrival numbers from a sharded board's board-wide counter (on shard 0; see shard.go), which
-- every shard's submissions carry in place of their period's own counter, so that equal scores on different shards
-- rank by first arrival. ARGV: definition SHA-1, n. Reply: the last number taken (the block is last-n+1 .. last).
local bad = check_def(ARGV[1])
if bad then return bad end
-- Arrival numbers stay below 2^53, where the scripts hold them exactly in a double (token_small): a board of 9 *
-- 10^15 submissions.
local n = tonum(ARGV[2])
local cur = tonum(rcall('HGET', base .. K.counters, 'arr')) or 0
if cur + n >= 2 ^ 53 then return redis.error_reply('the arrival counter of the board is exhausted') end
return rcall('HINCRBY', base .. K.counters, 'arr', n)
