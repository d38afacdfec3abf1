-- rankscore tells where a new player with a given score would rank in a window period right now, and writes
-- nothing (it is registered no-writes). A new player ranks after every player with an equal or better score (fair
-- ties), and lands where submit.lua's place() would put it: in the exact tier, with an exact rank, or in the tail,
-- with a rank estimated as for tail players (tail_before), its equals counted exactly while its histogram bucket
-- counts scores one by one.
-- ARGV: definition SHA-1, window code, period, internal score, exactTop (0: none).
-- Reply: {size, rank, tieRank, approximate (0/1)}.
local bad = check_def(ARGV[1])
if bad then return bad end
local st = load_state(ARGV[2], ARGV[3], true)
local x, exactTop = tonum(ARGV[4]), tonum(ARGV[5])
local z = st.z
local better = rcall('ZCOUNT', z, '-inf', '(' .. fmt(x))
local exact = true
if exactTop > 0 then
  local n = rcall('ZCARD', z)
  if n < exactTop then
    exact = st.tn <= 0 or st.tb == nil or x < st.tb
  else
    local worst = rcall('ZRANGE', z, -1, -1, 'WITHSCORES')
    local wx = tonum(worst[2])
    exact = wx ~= nil and x < wx
  end
end
if exact then
  -- Every tail score is worse than x here (see place()), so the exact tier holds everybody at x or better.
  return { st.cnt, rcall('ZCOUNT', z, '-inf', fmt(x)) + 1, better + 1, 0 }
end
-- The tail: the whole exact tier ranks first, then the tail players with a better score, then, fair ties, those
-- with the same score (known while the bucket counts its scores one by one; else the linear share of
-- tail_before stands for both).
local before = tail_before(st, x)
local equal = 0
local vals = st.tn > 0 and bucket_vals(st, hidx(x)) or {}
for i = 1, #vals, 2 do -- compared as numbers: 0 may be stored as -0
  if tonum(vals[i]) == x then equal = equal + tonum(vals[i + 1]) end
end
local n = rcall('ZCARD', z)
local rank = min(n + before + equal + 1, st.cnt + 1)
return { st.cnt, rank, min(better + before + 1, rank), 1 }
