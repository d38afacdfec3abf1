-- remove deletes a player from the given window periods of a board, histogram and records included, and
-- publishes the change. ARGV: definition SHA-1, player, publish command ('' for none), channel, then pairs of
-- window code and period. Reply: number of periods the player was removed from.
-- Everything is read first; the writes come after and cannot fail.
local bad = check_def(ARGV[1])
if bad then return bad end
local player, pubcmd, channel = ARGV[2], ARGV[3], ARGV[4]
local found = {}
for i = 5, #ARGV - 1, 2 do
  local st = load_state(ARGV[i], ARGV[i + 1])
  local rk, rec, _, tok, x, exact = locate(st, player)
  if rec then
    local rank = rank_of(st, player, tok, x, exact)
    found[#found + 1] = { st = st, rk = rk, tok = tok, x = x, exact = exact, rank = rank }
  end
end

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
rcall('HDEL', base .. 'm', player)
publish(pubcmd, channel, changes)
return #found
