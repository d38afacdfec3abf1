-- submit applies a batch of submissions to one board, each atomically, in order.
-- ARGV: order ('a'|'d'), mode ('best'|'latest'|'sum'), exactTop (0: none), min, max ('' when unbounded, user
-- scale), dedupe TTL (s), liveTop, publish command ('' for none), channel, window codes (comma separated),
-- number of items, then per item: player, score, eventId, hasName, name, hasMeta, meta, updatedAt (unix s),
-- and per window: period, expireAt (unix s, 0: never).
-- Reply per item: {'ok'|'dup', rank, approximate, internal score, updatedAt, meta, prevRank|'', prevScore|'',
-- updated, size} or {'err', code, message}.
local desc = ARGV[1] == 'd'
local mode = ARGV[2]
local exactTop = tonumber(ARGV[3])
local minS, maxS = tonumber(ARGV[4]), tonumber(ARGV[5])
local dedupeTTL = tonumber(ARGV[6])
local liveTop = tonumber(ARGV[7])
local pubcmd, channel = ARGV[8], ARGV[9]
local wins = {}
for w in string.gmatch(ARGV[10], '[^,]+') do wins[#wins + 1] = w end
local nitems = tonumber(ARGV[11])
local stride = 8 + 2 * #wins
local LIMIT = 2 ^ 53

local function user(x) if desc then return -x end return x end
local watching = redis.call('EXISTS', base .. 'watch') == 1
local changes = {}

-- hist_add adds (d = 1) or removes (d = -1) a tail player with internal score x and keeps the tail bound tb, a
-- lower bound of every tail score: exact players must rank before it.
local function hist_add(st, x, d)
  hist_count(st, hidx(x), d)
  if st.tn <= 0 then
    st.tn, st.tb = 0, nil
  elseif d > 0 then
    if st.tb == nil or x < st.tb then st.tb = x end
  elseif hidx(x) == hidx(st.tb) then
    -- The bucket of the bound may have emptied: move the bound to the lowest bucket still in use.
    local k = hist_first(st)
    if k and k ~= hidx(st.tb) then st.tb = hbounds(k) end
  end
end

local function touch(key, exp)
  if exp > 0 then redis.call('EXPIREAT', key, exp) end
end

-- split moves part of the next record hash into a new one once records outgrow the hashes (linear hashing).
local function maybe_split(st, exp)
  local m = 2 ^ st.lvl
  if st.cnt <= LOAD * (m + st.sp) then return end
  local from, to = rkey(st.w, st.p, st.sp), rkey(st.w, st.p, st.sp + m)
  local all = redis.call('HGETALL', from)
  if #all > 0 then
    redis.call('DEL', from) -- rewritten below, so the hash is re-created in the compact encoding
    local keep, move = {}, {}
    for i = 1, #all, 2 do
      local t = keep
      if phash(all[i]) % (2 * m) ~= st.sp then t = move end
      t[#t + 1] = all[i]
      t[#t + 1] = all[i + 1]
    end
    if #keep > 0 then
      redis.call('HSET', from, unpack(keep))
      touch(from, exp)
    end
    if #move > 0 then
      redis.call('HSET', to, unpack(move))
      touch(to, exp)
    end
  end
  st.sp = st.sp + 1
  if st.sp == m then st.lvl, st.sp = st.lvl + 1, 0 end
end

-- place puts a player with internal score x and a fresh token into the exact ranking or the tail and returns
-- the record to store.
local function place(st, player, x, tok, ts, exp)
  local z = zkey(st.w, st.p)
  if exactTop == 0 then
    redis.call('ZADD', z, fmt(x), b62(tok) .. player)
    return make_rec(ts, tok, nil)
  end
  local n = redis.call('ZCARD', z)
  local exact = false
  if n < exactTop then
    exact = st.tn == 0 or x < st.tb
  else
    local worst = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
    local wx = tonumber(worst[2])
    if x < wx then
      exact = true
      redis.call('ZREM', z, worst[1])
      local wp = string.sub(worst[1], 7)
      local wk = record_key(st, phash(wp))
      local wts, wtok = parse_rec(redis.call('HGET', wk, wp))
      redis.call('HSET', wk, wp, make_rec(wts, wtok, wx))
      hist_add(st, wx, 1)
    end
  end
  if exact then
    redis.call('ZADD', z, fmt(x), b62(tok) .. player)
    return make_rec(ts, tok, nil)
  end
  hist_add(st, x, 1)
  return make_rec(ts, tok, x)
end

local function save_state(st, exp)
  local sk = skey(st.w, st.p)
  if exactTop > 0 then
    redis.call('HSET', sk, 'seq', st.seq, 'cnt', st.cnt, 'lvl', st.lvl, 'sp', st.sp, 'tn', st.tn)
    if st.tb then redis.call('HSET', sk, 'tb', fmt(st.tb)) else redis.call('HDEL', sk, 'tb') end
  else
    redis.call('HSET', sk, 'seq', st.seq, 'cnt', st.cnt, 'lvl', st.lvl, 'sp', st.sp)
  end
  touch(sk, exp)
  touch(zkey(st.w, st.p), exp)
  if exactTop > 0 then touch(hkey(st.w, st.p), exp) end
end

local function submit_one(i0)
  local player, score, eventId = ARGV[i0], tonumber(ARGV[i0 + 1]), ARGV[i0 + 2]
  local hasName, name, hasMeta, meta = ARGV[i0 + 3] == '1', ARGV[i0 + 4], ARGV[i0 + 5] == '1', ARGV[i0 + 6]
  local ts = tonumber(ARGV[i0 + 7])

  local ekey
  if eventId ~= '' then
    ekey = base .. 'e:' .. eventId
    local prev = redis.call('GET', ekey)
    if prev then
      local r = cjson.decode(prev)
      r[1] = 'dup'
      return r
    end
  end

  -- Plan every window before writing anything, so a rejected item changes nothing.
  local h = phash(player)
  local plans = {}
  for wi, w in ipairs(wins) do
    local p, exp = ARGV[i0 + 8 + 2 * (wi - 1)], tonumber(ARGV[i0 + 9 + 2 * (wi - 1)])
    local st = load_state(w, p)
    local rk, rec, ots, otok, ox, oexact = locate(st, player, h)
    local sx = score
    if desc then sx = -score end
    local nx = sx
    if rec then
      if mode == 'best' then
        if ox <= sx then nx = ox end
      elseif mode == 'sum' then
        nx = ox + sx
      end
    end
    if mode == 'sum' then
      local u = user(nx)
      if u ~= u or math.abs(u) > LIMIT then
        return { 'err', 'BAD_USER_INPUT', 'the total would exceed 2^53 in magnitude' }
      end
      if (minS and u < minS) or (maxS and u > maxS) then
        return { 'err', 'BAD_USER_INPUT', 'the total ' .. fmt(u) .. ' would leave the board\'s score range' }
      end
    end
    plans[wi] = { st = st, rk = rk, rec = rec, ots = ots, otok = otok, ox = ox, oexact = oexact, nx = nx, exp = exp }
  end

  local out
  for wi, pl in ipairs(plans) do
    local st = pl.st
    local z = zkey(st.w, st.p)
    local prevRank, prevApprox
    if pl.rec then prevRank, prevApprox = rank_of(st, player, pl.otok, pl.ox, pl.oexact) end
    local changed = (not pl.rec) or pl.nx ~= pl.ox
    local tok, uts, exact = pl.otok, pl.ots, pl.oexact
    if changed then
      st.seq = st.seq + 1
      tok, uts = st.seq, ts
      if pl.rec then
        if pl.oexact then
          redis.call('ZREM', z, b62(pl.otok) .. player)
        else
          hist_add(st, pl.ox, -1)
        end
      else
        st.cnt = st.cnt + 1
      end
      local rec = place(st, player, pl.nx, tok, ts, pl.exp)
      exact = string.find(rec, ':', 11, true) == nil
      local rk = record_key(st, h)
      redis.call('HSET', rk, player, rec)
      touch(rk, pl.exp)
      if not pl.rec then maybe_split(st, pl.exp) end
      save_state(st, pl.exp)
    end
    local rank, approx = rank_of(st, player, tok, pl.nx, exact)
    if changed and (watching or rank <= liveTop or (prevRank and prevRank <= liveTop)) then
      changes[#changes + 1] = { st.w, st.p, player, prevRank or 0, rank }
    end
    if wi == 1 then
      out = { 'ok', rank, approx, fmt(pl.nx), uts, '', prevRank or '', '', changed and 1 or 0, st.cnt }
      if pl.rec then out[8] = fmt(pl.ox) end
    end
  end

  if hasName or hasMeta then
    local mk = base .. 'm'
    local cur = redis.call('HGET', mk, player)
    local obj = {}
    if cur then obj = cjson.decode(cur) end
    if hasName then obj.n = name end
    if hasMeta then obj.m = meta end
    local enc = cjson.encode(obj)
    redis.call('HSET', mk, player, enc)
    out[6] = enc
  else
    out[6] = meta_of(player)
  end

  if ekey then redis.call('SET', ekey, cjson.encode(out), 'EX', dedupeTTL) end
  return out
end

local replies = {}
for i = 1, nitems do
  replies[i] = submit_one(12 + (i - 1) * stride)
end

if #changes > 0 and pubcmd ~= '' then
  local ver = redis.call('HINCRBY', base .. 'c', 'ver', 1)
  redis.call(pubcmd, channel, cjson.encode({ v = ver, c = changes }))
end
return replies
