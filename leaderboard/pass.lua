-- pass takes ledgered events of a sharded board through the gate of a shard they change nothing on (submissions
-- and removals of other shards' players), so that every shard's high-water mark follows the board's and each
-- shard applies the board's events in the ledger's order (shardledger.go). The gate carries the range's last seq.
-- ARGV: definition SHA-1.
local bad = check_def(ARGV[1])
if bad then return bad end
return 'ok'
