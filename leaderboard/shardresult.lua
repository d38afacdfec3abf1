-- shardresult stores in the eventId records of a sharded board's submissions (on their shard) the places on the
-- whole board that their first results reported (shardwrite.go), so that a retry gets the first result back as on
-- a board of one shard: submit.lua stored the shard's own numbers. ARGV: definition SHA-1, then per item: eventId,
-- rank, tieRank (0: not asked), size, previous rank ('' : none), approximate (0/1). Reply: how many records it
-- found.
local bad = check_def(ARGV[1])
if bad then return bad end
local n = 0
for i = 2, #ARGV - 5, 6 do
  local k = base .. K.event .. ARGV[i]
  local prev = rcall('GET', k)
  if prev then
    local ok, r = pcall(cjson.decode, prev)
    if ok and type(r) == 'table' and type(r.r) == 'table' and #r.r >= 17 then
      r.r[2], r.r[10], r.r[7], r.r[18] = tonum(ARGV[i + 1]), tonum(ARGV[i + 3]), ARGV[i + 4], 1
      r.r[3] = tonum(ARGV[i + 5])
      if tonum(ARGV[i + 2]) > 0 then r.r[11] = tonum(ARGV[i + 2]) end
      rcall('SET', k, cjson.encode(r), 'KEEPTTL')
      n = n + 1
    end
  end
end
return n
