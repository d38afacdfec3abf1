-- shardnear places probes on one shard of a sharded board (shard.go): for each (internal score, token) it counts
-- the shard's players ahead of it and those with a strictly better score, and lists up to nb players before it and
-- na after it. A merged read adds the counts of every shard (rank = 1 + the players ahead on all of them) and merges
-- the lists (top: a probe before everybody; aroundMe: the player's own).
-- ARGV: definition SHA-1, window code, period, fields (F_UPDATED, F_META of common.lua; F_TIE: count the players
-- with a better score also where the probe finds its player's own member), number of probes, then per
-- probe: internal score ('-inf': before everybody; '?': where this shard has the probe's player, see below), token
-- ('' : before every player with that score, '+': after them), player (its own member is not listed; '' : none),
-- nb, na.
-- Reply: per probe (the batcher merges calls) {ahead, better, before rows, after rows, players in the period on this
-- shard, players in its exact tier, its tail's bound, whether a '?' probe's player is in the tail (1) or not (0),
-- and for a '?' probe the player's row}; a row is {player, internal score, updatedAt (0: not asked), meta, token}. A
-- '?' probe whose player has no score here answers ahead -1 and no rows. On exactTop boards the counts add the
-- shard's tail estimate (tail_before) and the rows come from its exact tier; the tail's bound (tb: no tail player
-- has a better internal score; '' : no tail) tells where its tail may begin (shard.go's tailCut).
local bad = check_def(ARGV[1])
if bad then return bad end
local st = load_state(ARGV[2], ARGV[3], true)
local z = st.z
local fields = tonum(ARGV[4])
local wantTs, wantMeta, wantTie = has(fields, F_UPDATED), has(fields, F_META), has(fields, F_TIE)

-- tok_less compares two tokens as the sorted set orders members: by bytes (Lua's < on strings is strcoll's, which
-- a locale may change). A token's first byte gives its length, so a shorter token is a smaller number.
local function tok_less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = sbyte(a, i), sbyte(b, i)
    if x ~= y then return x < y end
  end
  return false
end

local function member_token(m) return ssub(m, 1, token_len(m) or 0) end

local function rows_of(r)
  local out, players = {}, {}
  for i = 1, #r, 2 do
    local m = r[i]
    local p = member_player(m)
    local ts = 0
    if wantTs then ts = rec_ts(rcall('HGET', record_key(st, phash(st, p)), p)) or 0 end
    out[#out + 1] = { p, r[i + 1], ts, '', member_token(m) }
    players[#players + 1] = p
  end
  if wantMeta and #players > 0 then
    local m = metas(players)
    for k = 1, #out do out[k][4] = m[k] end
  end
  return out
end

local tail, tier = tail_bound(st), rcall('ZCARD', z)
local out = {}
for i = 6, #ARGV - 4, 5 do
  local xs, tok, player, nb, na = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonum(ARGV[i + 3]), tonum(ARGV[i + 4])
  local ahead, better, own, me, inTail = 0, 0, false, nil, 0
  if xs == '?' then
    -- Find the player here first: the probe is its own place (a read that starts from a player asks its shard so).
    local _, rec, ts, t, x, exact = locate(st, player)
    if rec then
      xs, tok = fmt(x), t
      if not exact then inTail = 1 end
      if not wantTs then ts = 0 end
      me = { player, xs, ts, '', tok }
      if wantMeta then me[4] = meta_of(player) end
    end
  end
  if xs == '?' then
    ahead = -1 -- not here
  elseif xs ~= '-inf' then
    local r
    if player ~= '' and tok ~= '' then r = rcall('ZRANK', z, tok .. player) end
    if not r or wantTie then
      better = rcall('ZCOUNT', z, '-inf', '(' .. xs)
      ahead = better
    end
    if r then
      -- The player's own member: its rank counts the players ahead (better stays 0 unless a tie rank is asked).
      ahead, own = r, true
    elseif tok == '+' then
      ahead = better + rcall('ZCOUNT', z, xs, xs)
    elseif tok ~= '' then
      -- The members with this score are ranks better .. better+eq-1, ordered by token: find the first whose
      -- token is not before tok.
      local lo, hi = better, better + rcall('ZCOUNT', z, xs, xs)
      while lo < hi do
        local mid = floor((lo + hi) / 2)
        local m = rcall('ZRANGE', z, mid, mid)[1]
        if tok_less(member_token(m), tok) then lo = mid + 1 else hi = mid end
      end
      ahead = lo
    end
  end
  if xs ~= '-inf' and xs ~= '?' and st.tn > 0 then
    -- exactTop: the shard's players beyond its exact tier with a better score, estimated as rank_of does.
    local t = tail_before(st, tonum(xs))
    ahead, better = ahead + t, better + t
  end
  local before, after = {}, {}
  if xs == '?' then nb, na = 0, 0 end
  if nb > 0 and ahead > 0 then
    before = rows_of(rcall('ZRANGE', z, max(0, ahead - nb), ahead - 1, 'WITHSCORES'))
  end
  if na > 0 then
    local from = ahead
    if own then from = ahead + 1 end
    after = rows_of(rcall('ZRANGE', z, from, from + na - 1, 'WITHSCORES'))
  end
  out[#out + 1] = { ahead, better, before, after, st.cnt, tier, tail, inTail, me }
end
return out
