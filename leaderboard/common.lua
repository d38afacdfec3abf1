-- Shared by every script of a board; prepended to each script when it is loaded.
--
-- KEYS[1] is the board's key base "<prefix>:{<tag>}:". Every key of a board starts with it, so all of them are
-- in one cluster slot and every script on a board is atomic. Keys derived from it (same slot):
--   z:<w>:<period>       sorted set, the exact ranking. Score: the score, negated on DESC boards, so that one
--                        ascending order serves both; member: 6-char base-62 arrival token .. playerId, so equal
--                        scores rank by first arrival.
--   r:<w>:<period>:<n>   player records, linear-hashed into small hashes (kept in Redis's compact listpack
--                        encoding): playerId -> "<unix seconds, 10 digits><token>" or, for players beyond
--                        exactTop, "<...>:<internal score>".
--   s:<w>:<period>       state: seq (arrival counter), cnt (players), lvl/sp (record hashing), tn/tb (tail
--                        count and bound).
--   h:<w>:<period>       histogram of tail scores (exactTop boards), a Fenwick tree over score buckets.
--   m                    playerId -> {"n": displayName, "m": metadata}
--   c                    board counters: ver (version of published changes)
--   e:<eventId>          first result of an eventId
--   watch                present while some process watches single players' ranks on this board
local base = KEYS[1]

local LOAD = 48 -- average records per record hash before one more is split off (max listpack is 128)
local HS = 64   -- histogram buckets per power of two (about 1.1% wide)
local TINY = 2 ^ -16
local B62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

local function zkey(w, p) return base .. 'z:' .. w .. ':' .. p end
local function skey(w, p) return base .. 's:' .. w .. ':' .. p end
local function hkey(w, p) return base .. 'h:' .. w .. ':' .. p end
local function rkey(w, p, n) return base .. 'r:' .. w .. ':' .. p .. ':' .. n end

-- fmt prints a double so that tonumber (and Go's ParseFloat) gives back the same double, briefly when it can.
local function fmt(x)
  local s = string.format('%.15g', x)
  if tonumber(s) ~= x then s = string.format('%.17g', x) end
  return s
end

local function b62(n)
  local t = {}
  for i = 6, 1, -1 do
    local d = n % 62
    t[i] = string.sub(B62, d + 1, d + 1)
    n = (n - d) / 62
  end
  return table.concat(t)
end

-- phash is a 32-bit hash of a player id (polynomial modulo a prime; exact in doubles).
local function phash(s)
  local h = 0
  for i = 1, #s do h = (h * 257 + string.byte(s, i)) % 4294967291 end
  return h
end

local function load_state(w, p)
  local v = redis.call('HMGET', skey(w, p), 'seq', 'cnt', 'lvl', 'sp', 'tn', 'tb')
  return { w = w, p = p, seq = tonumber(v[1]) or 0, cnt = tonumber(v[2]) or 0, lvl = tonumber(v[3]) or 0,
    sp = tonumber(v[4]) or 0, tn = tonumber(v[5]) or 0, tb = tonumber(v[6]) }
end

-- record_key returns the record hash that holds the player with hash h (linear hashing).
local function record_key(st, h)
  local m = 2 ^ st.lvl
  local b = h % m
  if b < st.sp then b = h % (m * 2) end
  return rkey(st.w, st.p, b)
end

-- parse_rec splits a record into updatedAt (unix s), token and, for tail players, the internal score.
local function parse_rec(v)
  local ts = tonumber(string.sub(v, 1, 10))
  local c = string.find(v, ':', 11, true)
  if c then return ts, tonumber(string.sub(v, 11, c - 1)), tonumber(string.sub(v, c + 1)) end
  return ts, tonumber(string.sub(v, 11)), nil
end

local function make_rec(ts, tok, tailx)
  local v = string.format('%010d', ts) .. string.format('%d', tok)
  if tailx then v = v .. ':' .. fmt(tailx) end
  return v
end

-- Histogram buckets are log-scaled: HS per power of two, mirrored for negative scores, one bucket around 0.
local function hidx(x)
  local a = math.abs(x)
  if a < TINY then return 0 end
  local m, e = math.frexp(a)
  local k = (e + 16) * HS + math.floor((m - 0.5) * 2 * HS) + 1
  if x < 0 then return -k end
  return k
end

local function hbounds(k)
  if k == 0 then return -TINY, TINY end
  local a = math.abs(k) - 1
  local sub = a % HS
  local e = (a - sub) / HS - 16
  local lo = math.ldexp(0.5 + sub / (2 * HS), e)
  local hi = math.ldexp(0.5 + (sub + 1) / (2 * HS), e)
  if k < 0 then return -hi, -lo end
  return lo, hi
end

-- The tail histogram is a Fenwick tree over bucket indexes (fields 1..FN of the h: hash), so counting the tail
-- players before a score, and adding or removing one, each take O(log FN) field reads or increments.
local KMAX = 71 * HS
local FN = 2 * KMAX + 1

local function lowbit(i)
  local b = 1
  while i % (b * 2) == 0 do b = b * 2 end
  return b
end

local function hist_count(st, k, d)
  local hk = hkey(st.w, st.p)
  local i = k + KMAX + 1
  while i <= FN do
    redis.call('HINCRBY', hk, i, d)
    i = i + lowbit(i)
  end
  st.tn = st.tn + d
end

-- hist_before returns the number of tail players in buckets before k, and in bucket k itself.
local function hist_before(st, k)
  local fields, mark = {}, 0
  local i = k + KMAX + 1
  while i > 0 do
    fields[#fields + 1] = i
    i = i - lowbit(i)
  end
  mark = #fields
  i = k + KMAX
  while i > 0 do
    fields[#fields + 1] = i
    i = i - lowbit(i)
  end
  local v = redis.call('HMGET', hkey(st.w, st.p), unpack(fields))
  local upto, below = 0, 0
  for j = 1, #fields do
    local n = tonumber(v[j]) or 0
    if j <= mark then upto = upto + n else below = below + n end
  end
  return below, upto - below
end

-- hist_first returns the lowest bucket that holds a tail player (nil when the tail is empty).
local function hist_first(st)
  if st.tn <= 0 then return nil end
  local hk = hkey(st.w, st.p)
  local pos, rem, step = 0, 1, 1
  while step * 2 <= FN do step = step * 2 end
  while step >= 1 do
    local nxt = pos + step
    if nxt <= FN then
      local n = tonumber(redis.call('HGET', hk, nxt)) or 0
      if n < rem then
        pos = nxt
        rem = rem - n
      end
    end
    step = step / 2
  end
  return pos - KMAX
end

-- tail_before estimates how many tail players rank before internal score x: all of the better buckets, and a
-- linear share of its own bucket.
local function tail_before(st, x)
  if st.tn <= 0 then return 0 end
  local k = hidx(x)
  local before, own = hist_before(st, k)
  local lo, hi = hbounds(k)
  local f = (x - lo) / (hi - lo)
  if f < 0 then f = 0 elseif f > 1 then f = 1 end
  return before + math.floor(own * f)
end

-- locate finds a player (h: its phash, when the caller has it): returns record key, record (or nil), and when present, ts, token, internal score and
-- whether the player is in the exact ranking.
local function locate(st, player, h)
  local rk = record_key(st, h or phash(player))
  local rec = redis.call('HGET', rk, player)
  if not rec then return rk, nil end
  local ts, tok, tx = parse_rec(rec)
  if tx then return rk, rec, ts, tok, tx, false end
  local x = redis.call('ZSCORE', zkey(st.w, st.p), b62(tok) .. player)
  if not x then return rk, nil end -- a record without its index entry cannot happen; treat as absent
  return rk, rec, ts, tok, tonumber(x), true
end

-- rank_of returns the 1-based rank of a located player and whether it is estimated.
local function rank_of(st, player, tok, x, exact)
  local z = zkey(st.w, st.p)
  if exact then
    local r = redis.call('ZRANK', z, b62(tok) .. player)
    if not r then error('LB_INTERNAL record without index entry for ' .. player) end
    return r + 1, 0
  end
  local r = redis.call('ZCARD', z) + tail_before(st, x) + 1
  if r > st.cnt then r = st.cnt end
  return r, 1
end

local function meta_of(player)
  return redis.call('HGET', base .. 'm', player) or ''
end

-- entry is the reply shape of one player: id, rank, approximate (0/1), internal score, updatedAt, meta.
local function entry(st, player, withmeta)
  local _, rec, ts, tok, x, exact = locate(st, player)
  if not rec then return nil end
  local r, approx = rank_of(st, player, tok, x, exact)
  local m = ''
  if withmeta then m = meta_of(player) end
  return { player, r, approx, fmt(x), ts, m }
end

-- append_rows adds entries for ZRANGE ... WITHSCORES rows whose first row has rank first.
local function append_rows(st, rows, first, out)
  for i = 1, #rows, 2 do
    local p = string.sub(rows[i], 7)
    local rec = redis.call('HGET', record_key(st, phash(p)), p)
    local ts = 0
    if rec then ts = parse_rec(rec) end
    out[#out + 1] = { p, first + (i - 1) / 2, 0, rows[i + 1], ts, meta_of(p) }
  end
  return out
end
