-- shardrows finds players on one shard of a sharded board (shard.go): what a merged read needs to place them on
-- the whole board. ARGV: definition SHA-1, window code, period, fields (F_UPDATED, F_META of common.lua), then
-- player ids. Reply: {players in the period on this shard, then per player found: {player, token, internal score,
-- updatedAt (0: not asked), meta ('' : not asked or none)}}. Sharded boards keep every player exact.
local bad = check_def(ARGV[1])
if bad then return bad end
local st = load_state(ARGV[2], ARGV[3], true)
local fields = tonum(ARGV[4])
local out = { st.cnt }
local found = {}
for i = 5, #ARGV do
  local player = ARGV[i]
  local _, rec, ts, tok, x = locate(st, player)
  if rec then
    if not has(fields, F_UPDATED) then ts = 0 end
    out[#out + 1] = { player, tok, fmt(x), ts, '' }
    found[#found + 1] = player
  end
end
if has(fields, F_META) and #found > 0 then
  local m = metas(found)
  for k = 1, #found do out[k + 1][5] = m[k] end
end
return out
