-- arrivals takes n arrival numbers from a sharded board's board-wide counter (on shard 0; see shard.go), which
-- every shard's submissions carry in place of their period's own counter, so that equal scores on different shards
-- rank by first arrival. ARGV: definition SHA-1, n. Reply: the last number taken (the block is last-n+1 .. last).
local bad = check_def(ARGV[1])
if bad then return bad end
return rcall('HINCRBY', base .. K.counters, 'arr', tonum(ARGV[2]))
