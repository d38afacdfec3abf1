-- submit applies a batch of submissions to one board, each atomically, in order.
-- ARGV: definition SHA-1, order ('a'|'d'), mode ('best'|'latest'|'sum'), exactTop (0: none), min, max ('' when
-- unbounded, user scale), dedupe TTL (s), liveTop, publish command ('' for none), channel, window codes (comma
-- separated), now (unix s, the caller's clock), number of items, submissions allowed per player and minute (0: no
-- limit), fields (the parts of the reply to fill: F_TIE, F_META and F_PREV of common.lua, a bit set), then per
-- item: player, score, eventId, payload fingerprint, hasName, name, hasMeta, meta, updatedAt (unix s), arrival
-- number ('': the period's own counter gives it; a sharded board gives its board-wide one, see shard.go), clock
-- (unix s; '': the call's, now; a recorded event carries the one it was first applied with, so that a restore's
-- call applies events recorded at different times each as it was), and per window: period, expireAt (unix s, 0:
-- never); for SEASON '' and the caller's clock (unix ms, the same reading as
-- now): the season running at updatedAt, if its grace has not passed (season_of), else none and the window is
-- skipped.
-- Reply per item: {'ok'|'dup', rank, approximate, internal score, updatedAt, meta, prevRank|'', prevScore|'',
-- updated, size, tieRank, window index (1-based), period[, event version, event epoch]} for the first window
-- written ('ok' items carry the event the call published, if any; items with an arrival number 0 and '' when none,
-- then the player's token in that window and its token before, '' for a new player), or {'err', code, message}.
-- Checks in order: the eventId (a retry gets the first result back, and is not counted), the submission limit
-- (RATE_LIMITED; only applied items count, in the minute of the item's clock), then the item's own checks.
-- Closed periods: a window period with a close fence (fence_key) is final. A calendar one refuses the item
-- (PERIOD_CLOSED, nothing written), as Go refuses a late score past the grace; a season is skipped, as a season
-- whose grace is over is (season_of), and the item counts for the board's other windows.
--
-- Each item is planned first (every read and every check, for every window) and written only after that; the
-- writing part has no error path, so an item is either refused with nothing written or applied whole, and its
-- reply says which.
if LG then LG.items = true end -- each item is an event of its own (ledger_event below)
local bad = check_def(ARGV[1])
if bad then return bad end
local desc = ARGV[2] == 'd'
local mode = ARGV[3]
local exactTop = tonum(ARGV[4])
local minS, maxS = tonum(ARGV[5]), tonum(ARGV[6])
local dedupeTTL = tonum(ARGV[7])
local liveTop = tonum(ARGV[8])
local pubcmd, channel = ARGV[9], ARGV[10]
local wins = {}
for w in string.gmatch(ARGV[11], '[^,]+') do wins[#wins + 1] = w end
local now = tonum(ARGV[12])
local nitems = tonum(ARGV[13])
local maxPerMin = tonum(ARGV[14])
-- A part of the entry not asked for is 0 (tieRank) or '' (meta), and Redis does not do its work: a tieRank is a
-- ZCOUNT (two skip-list walks) and a player's meta a lookup in the names hash, together ~8 us of the 18-24 us of
-- an item's Redis time on a board of a million. An item with an eventId fills every part: its result is stored for retries,
-- which may ask for more.
local fields = tonum(ARGV[15])
local wantTie, wantMeta, wantPrev = has(fields, F_TIE), has(fields, F_META), has(fields, F_PREV)
local FIRST = 16
local stride = 11 + 2 * #wins
local SEQMAX_HI = 2 ^ 31 -- the arrival counter stays below 2^63
local SIZE_EVERY = 500  -- ms between published size changes of one window period (below the live top)

local function user(x) if desc then return -x end return x end
-- A restore builds keys nobody reads and nobody watches: its items reply 'ok' alone, so it reads no rank, no
-- metadata and no change event's parts.
local building = LG and LG.restore
local RESTORED = { 'ok' }
local watching = rcall('EXISTS', base .. K.watch) == 1
local changes = {}
-- The state of each window period written, read once per call and saved once at its end (save_state): the items
-- of a call run one after another, so each sees the state the one before left.
local states, dirty = {}, {} -- states[window][period]: no key string made per item
local seasons -- the SEASON window's state, read once when an item needs it (season_state)
local clock_ms -- Redis's own time, read once, only to pace size events

local function redis_ms()
  if not clock_ms then
    local t = rcall('TIME')
    clock_ms = tonum(t[1]) * 1000 + floor(tonum(t[2]) / 1000)
  end
  return clock_ms
end

-- hist_add adds (d = 1) or removes (d = -1) a tail player with internal score x and keeps the tail bound tb, a
-- lower bound of every tail score: exact players must rank before it.
local function hist_add(st, x, d, ttl)
  tail_add(st, x, d, ttl)
  if st.tn <= 0 then
    st.tn, st.tb = 0, nil
  elseif d > 0 then
    if st.tb == nil or x < st.tb then st.tb = x end
  elseif st.tb == nil or hidx(x) == hidx(st.tb) then
    -- The bucket of the bound may have emptied: move the bound to the lowest bucket still in use.
    local k = hist_first(st)
    if k and (st.tb == nil or k ~= hidx(st.tb)) then st.tb = hbounds(k) end
  end
end

-- below_top reports whether a player whose internal score improves to x on a BEST board ranks below the live
-- top after it, and so before it too: then its rank before, asked for by neither the reply (F_PREV) nor a change
-- event, is not read (a ZRANK and its call: ~1.2 us of a bulk item's ~21 us in Redis). It compares x with
-- st.topx, the liveTop-th score when first asked in this call (false: fewer players). During a BEST call players
-- only join or improve, so at least liveTop players other than this one keep a score at or below topx (this
-- one's old score is above x); with x >= topx all of them rank before it, ties by their earlier arrival.
local function below_top(st, x)
  if mode ~= 'best' or watching or (exactTop > 0 and exactTop < liveTop) then return false end
  if st.topx == nil then
    local r = rcall('ZRANGE', st.z, liveTop - 1, liveTop - 1, 'WITHSCORES')
    st.topx = tonum(r[2]) or false
  end
  return st.topx ~= false and x >= st.topx
end

local function touch(key, ttl)
  if ttl > 0 then rcall('EXPIRE', key, ttl) end
end

-- split moves part of the next record hash into a new one once records outgrow the hashes (linear hashing).
local function maybe_split(st, ttl)
  local m = 2 ^ st.lvl
  if st.cnt <= LOAD * (m + st.sp) then return end
  local from, to = rkey(st.w, st.p, st.sp), rkey(st.w, st.p, st.sp + m)
  local all = rcall('HGETALL', from)
  if #all > 0 then
    rcall('DEL', from) -- rewritten below, so the hash is re-created in the compact encoding
    local keep, move = {}, {}
    for i = 1, #all, 2 do
      local t = keep
      if phash(st, all[i]) % (2 * m) ~= st.sp then t = move end
      t[#t + 1] = all[i]
      t[#t + 1] = all[i + 1]
    end
    if #keep > 0 then
      rcall('HSET', from, unpack_(keep))
      touch(from, ttl)
    end
    if #move > 0 then
      rcall('HSET', to, unpack_(move))
      touch(to, ttl)
    end
  end
  st.sp = st.sp + 1
  if st.sp == m then st.lvl, st.sp = st.lvl + 1, 0 end
end

-- place puts a player with internal score x (xs: fmt(x)) and token tok (member m: tok .. player; arrival number
-- num, see make_rec) into the exact ranking or the tail and returns the record to store and whether it is exact.
local function place(st, player, x, xs, tok, m, num, ts, ttl)
  local z = st.z
  if exactTop == 0 then
    rcall('ZADD', z, xs, m)
    return make_rec(ts, tok, nil, num), true
  end
  local n = rcall('ZCARD', z)
  local exact = false
  if n < exactTop then
    exact = st.tn <= 0 or st.tb == nil or x < st.tb
  else
    local worst = rcall('ZRANGE', z, -1, -1, 'WITHSCORES')
    local wx = tonum(worst[2])
    if wx and x < wx then
      -- The worst exact player moves to the tail, keeping its token and updatedAt.
      exact = true
      rcall('ZREM', z, worst[1])
      local wp = member_player(worst[1])
      local wk = record_key(st, phash(st, wp))
      local wts = parse_rec(rcall('HGET', wk, wp)) or 0
      rcall('HSET', wk, wp, make_rec(wts, ssub(worst[1], 1, token_len(worst[1]) or 0), wx))
      hist_add(st, wx, 1, ttl)
    end
  end
  if exact then
    rcall('ZADD', z, xs, m)
    return make_rec(ts, tok, nil, num), true
  end
  hist_add(st, x, 1, ttl)
  return make_rec(ts, tok, x, num), false
end

local function save_state(st, ttl)
  local sk = skey(st.w, st.p)
  if exactTop > 0 then
    rcall('HSET', sk, 'seq', st.seq, 'sqh', st.sqh, 'cnt', st.cnt, 'lvl', st.lvl, 'sp', st.sp, 'hv', st.hv,
      'tn', st.tn)
    if st.tb then rcall('HSET', sk, 'tb', fmt(st.tb)) else rcall('HDEL', sk, 'tb') end
  else
    rcall('HSET', sk, 'seq', st.seq, 'sqh', st.sqh, 'cnt', st.cnt, 'lvl', st.lvl, 'sp', st.sp, 'hv', st.hv)
  end
  touch(sk, ttl)
  touch(st.z, ttl)
  if exactTop > 0 then touch(hkey(st.w, st.p), ttl) end
end

-- keep_names makes the names hash outlive every period written so far (ttl nil: the board has ALL_TIME, whose
-- records never expire, so neither do the names).
local function keep_names(ttl)
  if not ttl then return end
  local mk = base .. K.names
  local cur = rcall('TTL', mk)
  if cur == -1 or (cur >= 0 and cur < ttl) then rcall('EXPIRE', mk, ttl) end
end

local function refuse(code, msg) return { 'err', code, msg } end

-- fenced reports whether the window period of state st is closed (its close fence is set), asked once per call:
-- nothing in a call closes a period.
local function fenced(st)
  if st.fenced == nil then st.fenced = rcall('EXISTS', fence_key(st.w, st.p)) == 1 end
  return st.fenced
end

-- period_state returns the state of window w's period p, read once per call.
local function period_state(w, p)
  local byp = states[w]
  if not byp then
    byp = {}
    states[w] = byp
  end
  local st = byp[p]
  if not st then
    st = load_state(w, p)
    byp[p] = st
  end
  return st
end

-- plan reads and checks everything one item needs; it writes nothing. It returns the plan, or a refusal.
local function plan(i0)
  local it = { player = ARGV[i0], score = tonum(ARGV[i0 + 1]), eventId = ARGV[i0 + 2], fp = ARGV[i0 + 3],
    hasName = ARGV[i0 + 4] == '1', name = ARGV[i0 + 5], hasMeta = ARGV[i0 + 6] == '1', meta = ARGV[i0 + 7],
    ts = ARGV[i0 + 8] + 0 } -- an integer the caller printed: + 0 converts once, tonumber twice
  if ARGV[i0 + 9] ~= '' then it.arrival = ARGV[i0 + 9] + 0 end
  local clock = now -- the item's: the limit's minute and the periods' checks read it
  if ARGV[i0 + 10] ~= '' then clock = ARGV[i0 + 10] + 0 end
  local player = it.player

  if it.eventId ~= '' then
    it.ekey = base .. K.event .. it.eventId
    local prev = rcall('GET', it.ekey)
    if prev then
      local ok, r = pcall(cjson.decode, prev)
      if ok and type(r) == 'table' and type(r.r) == 'table' and not r.x then -- x: a refusal (keep_refusal)
        if r.f ~= it.fp then
          return nil, refuse('CONFLICT', 'eventId ' .. it.eventId .. ' was already used for another submission')
        end
        r.r[1] = 'dup'
        return nil, r.r
      end
      -- An unreadable dedupe record is replaced by this submission's result.
    end
  end

  if maxPerMin > 0 then
    it.lkey = limit_key(clock, player)
    if (tonum(rcall('GET', it.lkey)) or 0) >= maxPerMin then
      return nil, refuse('RATE_LIMITED', 'too many submissions for this player: the board allows ' .. maxPerMin ..
        ' a minute')
    end
  end

  it.wins = {}
  it.namesTTL = 0
  -- A window without a period for this item (SEASON when no season takes it) is skipped; an item no window
  -- takes is refused after the loop, with nothing written (planning only reads).
  for wi, w in ipairs(wins) do
    local p, exp = ARGV[i0 + 11 + 2 * (wi - 1)], ARGV[i0 + 12 + 2 * (wi - 1)] + 0
    if p == '' then -- SEASON: exp is the caller's clock in ms
      seasons = seasons or season_state()
      p, exp = season_of(seasons, it.ts, exp)
      if p and fenced(period_state(w, p)) then p = nil end -- closed: skipped as when its grace is over
    elseif exp > 0 and fenced(period_state(w, p)) then -- a calendar period (ALL_TIME never closes)
      return nil, refuse('PERIOD_CLOSED', 'the period ' .. p .. ' is closed')
    end
    if p and exp > 0 and LG and exp <= LG.ttlnow then
      -- A ledgered event for a period whose keys have expired by today's clock (a restore): nothing to write.
      if exp <= clock then return nil, refuse('PERIOD_CLOSED', 'the period ' .. p .. ' is closed') end
      p = nil
    end
    if p then
      local ttl = 0
      if exp > 0 then
        ttl = exp - clock
        if ttl <= 0 then return nil, refuse('PERIOD_CLOSED', 'the period ' .. p .. ' is closed') end
        if LG then ttl = exp - LG.ttlnow end -- keys live by today's clock
        if it.namesTTL and ttl > it.namesTTL then it.namesTTL = ttl end
      else
        it.namesTTL = nil
      end
      local st = period_state(w, p)
      local h = phash(st, player)
      local rk, rec, ots, otok, ox, oexact, om = locate(st, player, h)
      local sx = it.score
      if desc then sx = -sx end
      local nx = sx
      if rec then
        if mode == 'best' then
          if ox <= sx then nx = ox end
        elseif mode == 'sum' then
          nx = ox + sx
          -- The exact total is nx + e (TwoSum), so totals beyond 2^53 are seen even when nx rounds to 2^53.
          local bb = nx - ox
          local e = (ox - (nx - bb)) + (sx - bb)
          if abs(nx) > MAX_SCORE or (abs(nx) == MAX_SCORE and e ~= 0 and (e > 0) == (nx > 0)) then
            return nil, refuse('BAD_USER_INPUT', 'the total would exceed 2^53 in magnitude')
          end
          if sx ~= 0 and nx == ox then
            return nil, refuse('BAD_USER_INPUT', 'the delta ' .. fmt(it.score) ..
              ' is too small to change the total ' .. fmt(user(ox)))
          end
        end
      end
      if mode == 'sum' then
        local u = user(nx)
        if (minS and u < minS) or (maxS and u > maxS) then
          return nil, refuse('BAD_USER_INPUT', 'the total ' .. fmt(u) .. ' would leave the board\'s score range')
        end
      end
      local pl = { wi = wi, st = st, rk = rk, rec = rec, ots = ots, otok = otok, ox = ox, oexact = oexact, om = om,
        nx = nx, ttl = ttl }
      pl.changed = (not rec) or nx ~= ox
      if pl.changed and not it.arrival and st.seq + 1 >= LO and st.sqh + 1 >= SEQMAX_HI then
        return nil, refuse('INTERNAL', 'the arrival counter of period ' .. p .. ' is exhausted')
      end
      if rec and not building and (wantPrev or it.ekey or not pl.changed or not below_top(st, nx)) then
        pl.prevRank, pl.prevApprox = rank_of(st, player, otok, ox, oexact, om)
      end
      it.wins[#it.wins + 1] = pl
    end
  end
  if #it.wins == 0 then
    return nil, refuse('PERIOD_CLOSED',
      'no season takes this score: none ran when it was achieved, or it is closed')
  end

  it.metaOut = nil
  if it.hasName or it.hasMeta then
    local cur = rcall('HGET', base .. K.names, player)
    local obj = {}
    if cur then
      local ok, v = pcall(cjson.decode, cur)
      if ok and type(v) == 'table' then obj = v end
    end
    if it.hasName then obj.n = it.name end
    if it.hasMeta then obj.m = it.meta end
    it.metaOut = cjson.encode(obj)
    it.metaChanged = it.metaOut ~= cur
  elseif not building and (wantMeta or it.ekey) then
    it.metaCur = meta_of(player)
  else
    it.metaCur = ''
  end
  return it, nil
end

-- apply writes a planned item and returns its reply. Nothing in it can fail.
local function apply(it)
  local player, out = it.player, nil
  local wrote = it.metaChanged
  for _, pl in ipairs(it.wins) do
    local st = pl.st
    local z = st.z
    local tok, uts, exact, m = pl.otok, pl.ots, pl.oexact, pl.om
    -- The new and old internal scores printed once each, when the sorted set, a change event or the reply needs
    -- them (nil until then; oxs is '' for a new player).
    local nxs, oxs
    if pl.changed then
      wrote = true
      local num -- the arrival number when below 2^53, for make_rec
      if it.arrival then
        num = it.arrival
        tok = token_small(num)
      else
        st.seq = st.seq + 1
        if st.seq >= LO then st.seq, st.sqh = 0, st.sqh + 1 end
        tok, num = token(st.sqh, st.seq)
      end
      uts = it.ts
      if pl.rec then
        if pl.oexact then
          rcall('ZREM', z, pl.om)
        else
          hist_add(st, pl.ox, -1, pl.ttl)
        end
      else
        st.cnt = st.cnt + 1
      end
      m, nxs = tok .. player, fmt(pl.nx)
      local rec
      rec, exact = place(st, player, pl.nx, nxs, tok, m, num, it.ts, pl.ttl)
      local rk = pl.rk -- planned just before: no split since
      rcall('HSET', rk, player, rec)
      touch(rk, pl.ttl)
      if not pl.rec then maybe_split(st, pl.ttl) end
      if not st.dirty then
        st.dirty = true
        dirty[#dirty + 1] = st
      end
      st.ttl = pl.ttl
    end
    if not building then
      local prevRank = pl.prevRank
      local rank, approx = prevRank, pl.prevApprox
      if pl.changed then
        rank, approx = rank_of(st, player, tok, pl.nx, exact, m)
      end -- else the rank plan() read for this item still holds: nothing was written between the two
      local top = rank <= liveTop or (prevRank and prevRank <= liveTop)
      if (pl.changed or it.metaChanged) and (watching or top) or not out then
        nxs = nxs or fmt(pl.nx)
        oxs = pl.rec and fmt(pl.ox) or ''
      end
      if pl.changed then
        if watching or top then
          changes[#changes + 1] = { st.w, st.p, player, prevRank or 0, rank, oxs, nxs, st.cnt }
        elseif not pl.rec and redis_ms() - st.szp >= SIZE_EVERY then
          -- A join below the live top changes only the size; announced at most every SIZE_EVERY ms per period
          -- (receivers re-read once more a moment later for the joins in between).
          changes[#changes + 1] = { st.w, st.p, player, 0, rank, '', nxs, st.cnt } -- a new player: no old score
          st.szp = redis_ms()
          rcall('HSET', skey(st.w, st.p), 'szp', st.szp)
        end
      elseif it.metaChanged and (watching or top) then
        changes[#changes + 1] = { st.w, st.p, player, rank, rank, nxs, nxs, st.cnt } -- new name or metadata
      end
      if not out then
        local tie = 0
        if wantTie or it.ekey then tie = tie_of(st, pl.nx, rank, approx == 0) end
        out = { 'ok', rank, approx, nxs, uts, '', prevRank or '', oxs, pl.changed and 1 or 0, st.cnt, tie,
          pl.wi, st.p }
        if it.arrival then out[14], out[15], out[16], out[17] = 0, '', tok, pl.otok or '' end
      end
    end
  end

  if it.metaChanged then rcall('HSET', base .. K.names, player, it.metaOut) end
  if building then out = RESTORED
  elseif it.metaOut then out[6] = it.metaOut
  else out[6] = it.metaCur end
  if wrote then keep_names(it.namesTTL) end
  if it.lkey and rcall('INCR', it.lkey) == 1 then rcall('EXPIRE', it.lkey, LIMIT_TTL) end

  if it.ekey and not building then -- a restore has the ledger to find duplicates
    rcall('SET', it.ekey, cjson.encode({ f = it.fp, r = out }), 'EX', dedupeTTL)
  end
  return out
end

-- seen answers a ledgered item that was applied before (a retry the ledger found, or an event another process
-- applied first): its first result while the dedupe record lasts (a refusal as it was), else {'seen'} (the
-- caller reads the entry).
local function seen(eventId)
  if eventId ~= '' then
    local prev = rcall('GET', base .. K.event .. eventId)
    if prev then
      local ok, r = pcall(cjson.decode, prev)
      if ok and type(r) == 'table' and type(r.r) == 'table' then
        if not r.x then r.r[1] = 'dup' end
        return r.r
      end
    end
  end
  return { 'seen' }
end

-- keep_refusal keeps a live ledgered item's refusal (reply) in its eventId's dedupe record, marked x, for seen():
-- a retry sent before the refusal was answered finds the eventId still held by the ledger, so it is this event
-- again, and answers the refusal rather than an entry it did not make. plan() passes such a record by: once the
-- refusal is answered the ledger has freed the eventId (Ledger.Refuse), and a retry is a new attempt. A CONFLICT
-- is another submission's eventId: its record stays.
local function keep_refusal(i0, reply)
  local eventId = ARGV[i0 + 2]
  if eventId == '' or reply[1] ~= 'err' or reply[2] == 'CONFLICT' then return end
  rcall('SET', base .. K.event .. eventId, cjson.encode({ f = ARGV[i0 + 3], r = reply, x = 1 }), 'EX', dedupeTTL)
end

local replies = {}
for i = 1, nitems do
  local i0 = FIRST + (i - 1) * stride
  local reply
  if LG and not ledger_event(i) then
    reply = seen(ARGV[i0 + 2])
  else
    local it
    it, reply = plan(i0)
    if it then
      reply = apply(it)
    elseif LG and not building then
      keep_refusal(i0, reply)
    end
  end
  replies[i] = reply
end
ledger_save()
for _, st in ipairs(dirty) do save_state(st, st.ttl) end
local ep, ver = publish(pubcmd, channel, changes)
if ver then
  -- The event this call's changes went out in: a writer's own live views wait for no later one (Hub.Changed).
  for _, r in ipairs(replies) do
    if r[1] == 'ok' then
      r[14], r[15] = ver, ep
    end
  end
end
return replies
