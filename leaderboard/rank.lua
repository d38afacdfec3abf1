-- rank reads players' entries each on its own account: the rank reads of several callers on one board, merged
-- into one call by the batcher (see Store.Rank), pay for the call, the definition check and the state once.
-- ARGV: definition SHA-1, window code, period, fields (see F_ALL), number of players, player ids... Reply: one
-- value per player, {size, entry} ({size} when the player has no score): what ranks.lua replies for that player
-- alone.
local bad = check_def(ARGV[1])
if bad then return bad end
local st = load_state(ARGV[2], ARGV[3], true)
local fields = tonum(ARGV[4])
local rows = {}
local found = entries(st, ARGV, 6, fields, rows) -- one ZMSCORE for all of them
if has(fields, F_META) and #found > 0 then
  local m = metas(found)
  for k = 1, #found do rows[k][6] = m[k] end
end
-- entries keeps the players' order and leaves out those without a score (a player asked twice is found twice).
local out, j = {}, 1
for i = 6, #ARGV do
  local row = rows[j]
  if row and row[1] == ARGV[i] then
    out[#out + 1] = { st.cnt, row }
    j = j + 1
  else
    out[#out + 1] = { st.cnt }
  end
end
return out
