-- remove deletes a player from the given window periods of a board, histogram and records included, and
-- publishes the change. Closed periods (with a close fence) are final and keep the player, and so its display
-- name and metadata, which go only with its last score; when closed periods are the only ones that have it,
-- nothing changes. ARGV: definition SHA-1, player, publish command ('' for none), channel, then pairs of window
-- code and period. Reply: {number of periods the player was removed from, number of closed periods that keep it}.
-- Everything is read first; the writes come after and cannot fail.
local bad = check_def(ARGV[1])
if bad then return bad end
local player, pubcmd, channel = ARGV[2], ARGV[3], ARGV[4]
local found, kept = {}, 0
for i = 5, #ARGV - 1, 2 do
  local st = load_state(ARGV[i], ARGV[i + 1])
  local rk, rec, _, tok, x, exact = locate(st, player)
  if rec then
    if rcall('EXISTS', fence_key(st.w, st.p)) == 1 then
      kept = kept + 1
    else
      local rank = rank_of(st, player, tok, x, exact)
      found[#found + 1] = { st = st, rk = rk, tok = tok, x = x, exact = exact, rank = rank }
    end
  end
end
if #found == 0 and kept > 0 then return { 0, kept } end

local changes = {}
for _, f in ipairs(found) do
  local st = f.st
  if f.exact then
    rcall('ZREM', st.z, f.tok .. player)
  else
    tail_add(st, f.x, -1, nil)
    if st.tn <= 0 then
      rcall('HDEL', skey(st.w, st.p), 'tn', 'tb')
    else
      rcall('HSET', skey(st.w, st.p), 'tn', st.tn)
    end
  end
  rcall('HDEL', f.rk, player)
  rcall('HINCRBY', skey(st.w, st.p), 'cnt', -1)
  changes[#changes + 1] = { st.w, st.p, player, f.rank, 0, fmt(f.x), '', st.cnt - 1 }
end
if kept == 0 then rcall('HDEL', base .. K.names, player) end
publish(pubcmd, channel, changes)
return { #found, kept }
