-- Shared by every script of a board; prepended to each script when it is loaded.
--
-- KEYS[1] is the board's key base "<prefix>:{<tag>}:" (base). The keys of a board after it are named in one place,
-- leaderboard/keys.go, which documents each and renders them into this file at the "@keys" line below: K, the
-- names of the board's keys (base .. K.names, base .. K.counters, ...), and a builder per window period key (zkey,
-- skey, rkey, hkey, vkey, fence_key). Scripts name keys through them only (TestScriptsGlueNoKeys). Go renders two
-- more parts the same way: the record format and hashes (leaderboard/record.go, at "@record") and the aroundMe
-- window (leaderboard/aroundplain.go, at "@around").
local base -- KEYS[1], set at the start of every call (see script.go)

-- The library functions the scripts call, as locals bound by bind() at the start of a call (see script.go): in a
-- function library every global lookup misses the function's own environment first (a third of the cost of a
-- string.byte call), and FUNCTION LOAD gives no access to them while the library is set up.
local rcall, tonum, ssub, sbyte, schar, sformat, sfind, floor, abs, min, max, concat, reverse, unpack_

-- tonum_point is tonumber for the embedded store's Lua (gopher-lua, in miniredis), which reads no exponent after
-- digits without a decimal point: "1e+06" is how Go writes a score of 1,000,000 and %.15g a stored 1e15, and
-- tonumber gave nil for them there. Redis's own Lua reads them, and keeps tonumber itself (bind).
local function tonum_point(s)
  local x = tonumber(s)
  if x == nil and type(s) == 'string' then
    local m, e = string.match(s, '^([-+]?%d+)[eE]([-+]?%d+)$')
    if m then x = tonumber(m .. '.0e' .. e) end
  end
  return x
end

local function bind()
  rcall, tonum, unpack_ = redis.call, tonumber, unpack
  if tonum('1e1') == nil then tonum = tonum_point end
  ssub, sbyte, schar, sformat, sfind = string.sub, string.byte, string.char, string.format, string.find
  reverse = string.reverse
  floor, abs, min, max, concat = math.floor, math.abs, math.min, math.max, table.concat
end

local LOAD = 48 -- average records per record hash before one more is split off (max listpack is 128)
local HS = 64   -- histogram buckets per power of two (about 1.1% wide)
local TINY = 2 ^ -16
local B62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
-- d62 returns the value of a base-62 digit byte (nil for anything else). Arithmetic, not a table: the prelude of
-- every script call must stay cheap.
local function d62(b)
  if not b then return nil end
  if b >= 48 and b <= 57 then return b - 48 end
  if b >= 65 and b <= 90 then return b - 55 end
  if b >= 97 and b <= 122 then return b - 61 end
  return nil
end
local LO = 4294967296 -- 2^32: the arrival counter is sqh * 2^32 + seq, both parts exact in doubles

-- @keys (rendered from keys.go)
local VMAX = 128 -- distinct scores counted one by one per histogram bucket (a hash of this size stays a listpack)
-- snap_base is the start of the keys of export id's copy of a window period (K.snap; snapshot.lua).
local function snap_base(id) return base .. K.snap .. id .. ':' end
local LIMIT_TTL = 120 -- s a submission counter outlives the start of its minute (a minute, and slack for skew)
local function limit_key(now, player) return base .. K.limit .. floor(now / 60) .. ':' .. player end

-- def_shas remembers the SHA-1 of each definition text check_def has hashed: hashing a definition of ~250 bytes
-- cost ~0.8 us of every script call, a twentieth of a lone point read. A text's hash never changes, so the memo
-- cannot go stale; it lives as long as the function library (as EVAL, one call) and is emptied when the texts it
-- holds reach DEF_SHA_BYTES.
local def_shas, def_sha_bytes, DEF_SHA_BYTES = {}, 0, 1048576

-- The ledger's gate. A ledgered call (a function <library>_l_<role>, see script.go) applies events the ledger
-- recorded, and its last ARGV (removed before the script reads ARGV) says which: "<mode>,<first>,<last>,<ttl
-- now>,<board key>" then ",<seq>" per event the call carries (gateArg in sequencer.go). mode is 'w' for a live write and 'r' for a restore, which
-- builds the board while its definition waits in rdef (nobody reads a board without def) until restore_done.lua
-- moves it to def. first..last are the seqs the call stands for (0,0: it holds duplicates only), events Go
-- refused included (they are not sent, but take their place in the order). ttl now (unix s) is the clock key
-- lifetimes count from (a restore applies events with the clock they were recorded with; the keys live by
-- today's). c.lsq is the seq of the board's last event applied: a board's events apply in the ledger's order,
-- each once, whichever process sends them (LB_GAP <lsq> when earlier events are missing). board key is the
-- ledger's key of the events' board ('0': not compared); c.lbk, the key of the board the keys hold, set at its
-- creation: a call for another board of the same id (the keys are those of a board since deleted, after a failover
-- to a replica that lagged) is LB_OTHER, and its lsq says nothing of this board's events.
-- LG is the current call's gate; every prologue sets it (nil: the call is not ledgered).
local LG

local function ledger_args(argv)
  local a = argv[#argv]
  argv[#argv] = nil
  local g, i = { seqs = {} }, 0
  for f in string.gmatch(a, '[^,]+') do
    i = i + 1
    if i == 1 then
      g.restore = f == 'r'
    elseif i == 2 then
      g.first = tonumber(f)
    elseif i == 3 then
      g.last = tonumber(f)
    elseif i == 4 then
      g.ttlnow = tonumber(f)
    elseif i == 5 then
      g.key = f
    else
      g.seqs[#g.seqs + 1] = tonumber(f)
    end
  end
  return g
end

-- ledger_check reads the board's high-water mark and refuses the call when earlier events are missing, or when
-- the keys hold another board of the ledger.
local function ledger_check()
  local c = rcall('HMGET', base .. K.counters, 'lsq', 'lbk')
  if c[2] and LG.key ~= '0' and c[2] ~= LG.key then
    return redis.error_reply('LB_OTHER the keys hold board ' .. c[2] .. ' of the ledger, not ' .. LG.key)
  end
  LG.hwm = tonumber(c[1]) or 0
  if LG.first > LG.hwm + 1 then return redis.error_reply('LB_GAP ' .. LG.hwm) end
  return nil
end

-- ledger_event reports whether the call's event n is new: false when it was applied before.
local function ledger_event(n) return LG.seqs[n] > LG.hwm end

-- ledger_save moves the high-water mark past the call's events.
local function ledger_save()
  if LG and LG.last > LG.hwm then rcall('HSET', base .. K.counters, 'lsq', LG.last) end
end

-- check_def returns an error reply when the board is gone or its definition is not the one the caller holds
-- (sha: SHA-1 of the definition JSON), nil when the script may go on. A ledgered call also passes the gate, and
-- a call of one event that was applied before is LB_SEEN.
local function check_def(sha)
  local def = rcall('GET', base .. ((LG and LG.restore) and K.rdef or K.def))
  if not def then return redis.error_reply('LB_NOT_FOUND no leaderboard with this id') end
  local h = def_shas[def]
  if not h then
    h = redis.sha1hex(def)
    if def_sha_bytes + #def > DEF_SHA_BYTES then def_shas, def_sha_bytes = {}, 0 end
    def_shas[def] = h
    def_sha_bytes = def_sha_bytes + #def
  end
  if h ~= sha then return redis.error_reply('LB_STALE the leaderboard definition changed') end
  if LG then
    local bad = ledger_check()
    if bad then return bad end
    if not LG.items then
      if not ledger_event(1) then return redis.error_reply('LB_SEEN') end
      ledger_save()
    end
  end
  return nil
end

-- fmt prints a double so that tonumber (and Go's ParseFloat) gives back the same double, briefly when it can.
local function fmt(x)
  -- Whole numbers below 10^15 (most scores) print the same with %d, which costs a fraction of %.15g; -0 keeps
  -- its sign below.
  if x % 1 == 0 and x < 1e15 and x > -1e15 and x ~= 0 then return sformat('%d', x) end
  local s = sformat('%.15g', x)
  if tonum(s) ~= x then s = sformat('%.17g', x) end
  return s
end

-- b62 returns the byte of base-62 digit d (0..61): the inverse of d62.
local function b62(d)
  if d < 10 then return 48 + d elseif d < 36 then return 55 + d end
  return 61 + d
end

local tokbuf = {} -- token_small's bytes; reused, since every read and submit of an exact player makes a token

-- token_small is token() of an arrival number n below 2^53 (every board short of 9 * 10^15 submissions), in one
-- double and one string: a read of 100 friends makes 100 tokens, and token()'s limbs, table and reverse took a
-- tenth of its Redis time.
local function token_small(n)
  local k, p = 1, 62
  while n >= p do k, p = k + 1, p * 62 end -- p <= 62^9 < 2^60: exact
  tokbuf[1] = 48 + k -- b62(k): k <= 9, since n < 2^53 < 62^9
  for i = k + 1, 2, -1 do
    local r = n % 62
    n = (n - r) / 62
    -- b62(r), inline: the calls were an eighth of a token's cost
    if r < 10 then tokbuf[i] = 48 + r elseif r < 36 then tokbuf[i] = 55 + r else tokbuf[i] = 61 + r end
  end
  return schar(unpack_(tokbuf, 1, k + 1))
end

-- token encodes the arrival number hi * 2^32 + lo (below 2^63) so that byte order is numeric order: one character
-- giving the number of base-62 digits (1..11), then the digits. It prefixes the player id in the sorted set. Below
-- 2^53 it also returns the number itself, exact in a double (for make_rec).
local function token(hi, lo)
  if hi < 2097152 then -- below 2^53
    local n = hi * LO + lo
    return token_small(n), n
  end
  local t = {}
  repeat
    local r = hi % 62
    hi = (hi - r) / 62
    local x = r * LO + lo -- below 62 * 2^32: exact
    local d = x % 62
    lo = (x - d) / 62
    t[#t + 1] = ssub(B62, d + 1, d + 1)
  until hi == 0 and lo == 0
  return ssub(B62, #t + 1, #t + 1) .. reverse(concat(t))
end

-- token_len returns the length of the token that starts s (nil when s does not start with one).
local function token_len(s)
  local n = d62(sbyte(s, 1))
  if not n or n < 1 or n > 11 then return nil end
  return n + 1
end

-- member_player returns the player id of a sorted-set member.
local function member_player(m)
  return ssub(m, (token_len(m) or 1) + 1)
end

-- A window period's records are placed by the hash its state names (field hv): version 2 for every period
-- started since it exists, version 1 (no hv) for periods started before. Both are polynomials modulo the prime
-- 2^32 - 5, exact in doubles. Version 1 multiplies by 257, which is 1 modulo every power of two up to 256, so its
-- low bits (the ones linear hashing uses) follow the sum of the id's bytes: sequential ids (p1, p2, ...) crowded
-- a third of the record hashes, some to six times their load, and every lookup scanned the crowd. Version 2 takes
-- three bytes a step and multiplies once more at the end, which spreads any id set as evenly as a SHA-1 would
-- (sequential, numeric, UUIDs, e-mails), at a third of version 1's steps.
-- The record format (REC_*: see make_rec) and the hashes' constants (HASH_V, HP, HM1, HM2) are record.go's.
-- @record (rendered from record.go)
-- REC_SMALL: a record whose arrival number has at most 15 digits (below 10^15 < 2^53) reads it in one double.
local REC_SMALL = REC_TS + 15
local REC_N_FMT = REC_TS_FMT .. '%d' -- updatedAt, then the arrival number

local function phash1(s)
  local h = 0
  for i = 1, #s do h = (h * HM1 + sbyte(s, i)) % HP end
  return h
end

local function phash2(s)
  local n = #s
  local h = n
  for i = 1, n, 3 do
    local a, b, c = sbyte(s, i, i + 2)
    h = (h * HM2 + a * 65536 + (b or 0) * 256 + (c or 0)) % HP
  end
  return h * HM2 % HP
end

-- phash returns the record hash of a player id in the window period of state st.
local function phash(st, s)
  if st.hv == 2 then return phash2(s) end
  return phash1(s)
end

-- load_state reads a window period's state. A read (forRead) leaves out what only writes use, the arrival
-- counter (seq, sqh) and the pacing of size events (szp): three fields fewer to find and convert in every read
-- call, and nil in its state, so that a read that used them would fail loudly.
local function load_state(w, p, forRead)
  local v
  if forRead then
    v = rcall('HMGET', skey(w, p), 'cnt', 'lvl', 'sp', 'tn', 'tb', 'hv')
  else
    v = rcall('HMGET', skey(w, p), 'cnt', 'lvl', 'sp', 'tn', 'tb', 'hv', 'seq', 'sqh', 'szp')
  end
  -- A period without state has no records yet: it takes the current hash. (Every write of the state writes cnt
  -- with seq, so a read tells by cnt alone.)
  local hv = v[6] and v[6] + 0 or ((v[1] or v[7]) and 1 or HASH_V)
  local seq, sqh, szp
  if not forRead then seq, sqh, szp = (v[7] or 0) + 0, (v[8] or 0) + 0, (v[9] or 0) + 0 end
  -- z and rp: the period's sorted set and the start of its record hashes' keys, made once per call (an item's
  -- reads and writes name them several times, and every concatenation makes and hashes a new string).
  -- (v[k] or 0) + 0: the counters are integers this script wrote, or missing; arithmetic converts a string once,
  -- where tonumber converts it twice (it checks, then converts), and eight of them were a fifth of this function.
  return { w = w, p = p, seq = seq, cnt = (v[1] or 0) + 0, lvl = (v[2] or 0) + 0, sp = (v[3] or 0) + 0,
    tn = (v[4] or 0) + 0, tb = tonum(v[5]), sqh = sqh, szp = szp, hv = hv, z = zkey(w, p), rp = rkey(w, p, '') }
end

-- bucket_names holds the decimal names of record hash numbers below BUCKET_NAMES, each made once per library load
-- (per call where the scripts run as EVAL): concatenating a number prints it with %.14g, and that print was a
-- twentieth of a read of 100 friends in Redis. The bound caps its memory at a few MB (a board period of 3 million
-- players uses 62,500 record hashes).
local bucket_names, BUCKET_NAMES = {}, 65536

-- record_key returns the record hash that holds the player with hash h (phash; linear hashing).
local function record_key(st, h)
  local m = 2 ^ st.lvl
  local b = h % m
  if b < st.sp then b = h % (m * 2) end
  local name = bucket_names[b]
  if not name then
    name = sformat('%d', b)
    if b < BUCKET_NAMES then bucket_names[b] = name end
  end
  return st.rp .. name
end

-- token_limbs decodes a token back into the arrival number's high and low 32-bit parts.
local function token_limbs(tok)
  local hi, lo = 0, 0
  for i = 2, #tok do
    local x = lo * 62 + d62(sbyte(tok, i)) -- below 2^38: exact
    lo = x % LO
    hi = hi * 62 + (x - lo) / LO
  end
  return hi, lo
end

-- decimal writes the arrival number hi * 2^32 + lo in decimal.
local function decimal(hi, lo)
  if hi == 0 then return sformat('%d', lo) end
  local t = {}
  repeat
    local r = hi % 10
    hi = (hi - r) / 10
    local x = r * LO + lo
    local d = x % 10
    lo = (x - d) / 10
    t[#t + 1] = string.char(48 + d)
  until hi == 0 and lo == 0
  return reverse(concat(t))
end

-- make_rec encodes a record: updatedAt in exactly REC_TS decimal digits (the store accepts 2000-01-01 ..
-- 2286-11-20, unix 946684800 .. 9999999999), the arrival number in decimal, and for tail players REC_SEP and the
-- internal score. Fixed-width time and a separator before the score give every record one reading; an exact
-- player's record is all digits, which Redis keeps as a compact integer when it fits in 64 bits. n is the arrival
-- number of tok when the caller has it below 2^53 (nil: decoded from tok): one format then, where decoding the
-- token and writing the number in decimal took four fifths of a submission's record.
local function make_rec(ts, tok, tailx, n)
  local v
  if n then
    v = sformat(REC_N_FMT, ts, n)
  else
    v = sformat(REC_TS_FMT, ts) .. decimal(token_limbs(tok))
  end
  if tailx then v = v .. REC_SEP .. fmt(tailx) end
  return v
end

-- rec_ts returns the updatedAt of a record (its first REC_TS digits), or nil.
local function rec_ts(v)
  if type(v) ~= 'string' then return nil end
  return tonum(ssub(v, 1, REC_TS))
end

-- parse_rec splits a record into updatedAt (unix s), token and, for tail players, the internal score. It returns
-- nil for anything that is not a record.
local function parse_rec(v)
  if type(v) ~= 'string' then return nil end
  -- One scan: the first byte that is not a digit is the REC_SEP before a tail score, after REC_TS digits of
  -- updatedAt and the arrival number's (REC_MAX in all at most), or there is none. Anchored, the scan is one
  -- greedy match (%d: C's isdigit); unanchored ('%D'), a match started at every byte: 1.29 against 1.20 us a
  -- record, scan and all.
  local _, n = sfind(v, '^%d*') -- the arrival number ends at n, the last leading digit
  local tail = n < #v
  if tail and sbyte(v, n + 1) ~= REC_SEP_BYTE then return nil end
  if n <= REC_TS or n > REC_MAX then return nil end
  -- Digits only, checked above: + 0 converts them once (tonumber twice).
  local ts, tok = ssub(v, 1, REC_TS) + 0, nil
  if n <= REC_SMALL then
    tok = token_small(ssub(v, REC_TS + 1, n) + 0)
  else
    local hi, lo = 0, 0
    for i = REC_TS + 1, n do
      local x = lo * 10 + sbyte(v, i) - 48
      lo = x % LO
      hi = hi * 10 + (x - lo) / LO
    end
    tok = token(hi, lo)
  end
  if tail then return ts, tok, tonum(ssub(v, n + 2)) end
  return ts, tok, nil
end

-- Histogram buckets are log-scaled: HS per power of two, mirrored for negative scores, one bucket around 0.
local function hidx(x)
  local a = abs(x)
  if a < TINY then return 0 end
  local m, e = math.frexp(a)
  local k = (e + 16) * HS + floor((m - 0.5) * 2 * HS) + 1
  if x < 0 then return -k end
  return k
end

local function hbounds(k)
  if k == 0 then return -TINY, TINY end
  local a = abs(k) - 1
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
    rcall('HINCRBY', hk, i, d)
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
  local v = rcall('HMGET', hkey(st.w, st.p), unpack_(fields))
  local upto, below = 0, 0
  for j = 1, #fields do
    local n = tonum(v[j]) or 0
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
      local n = tonum(rcall('HGET', hk, nxt)) or 0
      if n < rem then
        pos = nxt
        rem = rem - n
      end
    end
    step = step / 2
  end
  return pos - KMAX
end

-- vals_count adds d tail players with internal score x to the exact counts of bucket k; a bucket that would hold
-- more than VMAX distinct scores is flagged and counts only in the histogram from then on. ttl: as for touch.
local function vals_count(st, k, x, d, ttl)
  local hk = hkey(st.w, st.p)
  if rcall('HEXISTS', hk, 'w' .. k) == 1 then return end
  local vk = vkey(st.w, st.p, k)
  local f = fmt(x)
  local n = rcall('HINCRBY', vk, f, d)
  if n <= 0 then
    rcall('HDEL', vk, f)
  elseif n == d and rcall('HLEN', vk) > VMAX then
    rcall('DEL', vk)
    rcall('HSET', hk, 'w' .. k, 1)
  elseif ttl and ttl > 0 then
    rcall('EXPIRE', vk, ttl)
  end
end

-- tail_add adds (d = 1) or removes (d = -1) a tail player with internal score x: histogram and exact counts.
local function tail_add(st, x, d, ttl)
  local k = hidx(x)
  hist_count(st, k, d)
  vals_count(st, k, x, d, ttl)
end

-- bucket_vals returns tail bucket k's distinct internal scores with their counts ({score, count, ...}, as HGETALL
-- gives them) while the bucket counts its scores one by one (at most VMAX), nil once it counts only its population.
local function bucket_vals(st, k)
  if rcall('HEXISTS', hkey(st.w, st.p), 'w' .. k) == 1 then return nil end
  return rcall('HGETALL', vkey(st.w, st.p, k))
end

-- tail_before counts the tail players who rank before internal score x: those of the better buckets (exact, from
-- the histogram), and those of its own bucket with a better score: exact while the bucket's scores are counted
-- one by one (at most VMAX distinct ones), else a linear share of the bucket. Exact counts make a tail rank the
-- first rank of the player's tie group; a share is off by less than the bucket's population.
local function tail_before(st, x)
  if st.tn <= 0 then return 0 end
  local k = hidx(x)
  local before, own = hist_before(st, k)
  if own <= 0 then return before end
  local vals = bucket_vals(st, k)
  if vals and #vals > 0 then
    for i = 1, #vals, 2 do
      if tonum(vals[i]) < x then before = before + tonum(vals[i + 1]) end
    end
    return before
  end
  local lo, hi = hbounds(k)
  local f = (x - lo) / (hi - lo)
  if f < 0 then f = 0 elseif f > 1 then f = 1 end
  return before + floor(own * f)
end

-- tail_bound returns where the tail of an exactTop board's window period may begin (shard.go's tailCut), printed
-- ('' : no tail): no tail player has a better internal score. tb, or the best score of tb's bucket (the tail's
-- first: see submit.lua's hist_add) while that bucket's scores are counted one by one: tb is only a lower bound
-- once a bucket emptied.
local function tail_bound(st)
  if st.tn <= 0 or not st.tb then return '' end
  local best = st.tb
  local vals = bucket_vals(st, hidx(best))
  if vals then
    for j = 1, #vals, 2 do
      local x = tonum(vals[j])
      if j == 1 or x < best then best = x end
    end
  end
  return fmt(best)
end

-- locate finds a player (h: its phash in st, when the caller has it): returns record key, record (or nil), and when
-- present, updatedAt, token, internal score, whether the player is in the exact ranking and, if so, its member
-- there (token .. player: made once, and a submission names it up to three times).
local function locate(st, player, h)
  local rk = record_key(st, h or phash(st, player))
  local rec = rcall('HGET', rk, player)
  if not rec then return rk, nil end
  local ts, tok, tx = parse_rec(rec)
  if not ts then return rk, nil end -- not a record: treat as absent
  if tx then return rk, rec, ts, tok, tx, false end
  local m = tok .. player
  local x = rcall('ZSCORE', st.z, m)
  if not x then return rk, nil end -- a record without its index entry cannot happen; treat as absent
  return rk, rec, ts, tok, tonum(x), true, m
end

-- rank_of returns the 1-based rank of a located player and whether it is estimated (m: its member, tok .. player,
-- when the caller has it; x: its internal score, or for an exact player also the score as Redis printed it, which
-- only the estimate reads). It never fails: an exact player missing from the index (which cannot happen) gets the
-- rank after the exact tier.
local function rank_of(st, player, tok, x, exact, m)
  local z = st.z
  if exact then
    local r = rcall('ZRANK', z, m or tok .. player)
    if r then return r + 1, 0 end
  end
  local r = rcall('ZCARD', z) + tail_before(st, tonum(x)) + 1
  if r > st.cnt then r = st.cnt end
  return r, 1
end

-- tie_of returns the competition rank (1 + players with a strictly better score) of a player with internal
-- score x whose rank_of is rank. Exact tier: one ZCOUNT. Tail (estimated): the estimated rank already counts only
-- strictly better tail players, so it is the rank less the exact-tier players with the same score (no exact player
-- has a worse score than a tail player); it stays between 1 + the better exact players and rank.
local function tie_of(st, x, rank, exact)
  local z = st.z
  local better = rcall('ZCOUNT', z, '-inf', '(' .. fmt(x))
  if exact then return better + 1 end
  return max(better + 1, rank - (rcall('ZCARD', z) - better))
end

local function meta_of(player)
  return rcall('HGET', base .. K.names, player) or ''
end

-- The parts of an entry a read fills besides id, rank, approximate, score and size (the Fields of read.go): a
-- bit set. A part not asked for is 0 (updatedAt, tieRank) or '' (meta) in the reply.
local F_UPDATED, F_TIE, F_META = 1, 2, 4
local F_ALL = 7
local F_VERSION = 8 -- ranks.lua: the reply starts with the board's change event version
local F_PREV = 16   -- submit.lua: the previous rank, whatever it costs (FieldPreviousRank)

local function has(fields, f) return floor(fields / f) % 2 == 1 end

-- entries appends to out the reply shape of each of players[first..] that has a score: id, rank, approximate
-- (0/1), internal score, updatedAt, meta (filled in by the caller, see metas), tieRank (fields: see F_ALL); it
-- returns the ids it appended. The exact players' scores come from one ZMSCORE: a ZSCORE each cost a read of 100
-- friends a fifth of its Redis time. Like locate, a record without its index entry (which cannot happen) counts as
-- absent.
local function entries(st, players, first, fields, out)
  local n, ids, tss, toks, txs, members = 0, {}, {}, {}, {}, {}
  for i = first, #players do
    local player = players[i]
    local ts, tok, tx = parse_rec(rcall('HGET', record_key(st, phash(st, player)), player))
    if ts then
      n = n + 1
      ids[n], tss[n], toks[n], txs[n] = player, ts, tok, tx
      if not tx then members[#members + 1] = tok .. player end
    end
  end
  local scores = {}
  if #members > 0 then scores = rcall('ZMSCORE', st.z, unpack_(members)) end
  local found, j = {}, 0
  local wantTie, wantTs = has(fields, F_TIE), has(fields, F_UPDATED)
  for k = 1, n do
    -- An exact player's score goes into the reply as ZMSCORE printed it (Go reads the same double from it): no
    -- tonumber and no fmt a player, a tenth of a read's Lua. x: the number, or that string (nil: not found).
    local x, xs, exact, m = txs[k], nil, false, nil
    if x then
      xs = fmt(x)
    else
      j = j + 1
      xs, exact, m = scores[j] or nil, true, members[j] -- false: a nil reply
      x = xs
    end
    if x then
      local r, approx = rank_of(st, ids[k], toks[k], x, exact, m)
      local tie, ts = 0, tss[k]
      if wantTie then tie = tie_of(st, tonum(x), r, approx == 0) end
      if not wantTs then ts = 0 end
      out[#out + 1] = { ids[k], r, approx, xs, ts, '', tie }
      found[#found + 1] = ids[k]
    end
  end
  return found
end

-- metas returns the metadata of a list of players ('' for none), with one HMGET per 500 of them: one Redis call per
-- player would cost a page of 100 a quarter of its time. mk: the names hash (nil: the board's; a snapshot's).
local function metas(players, mk)
  if #players == 1 and not mk then return { meta_of(players[1]) } end -- HGET: cheaper than HMGET for one
  local out = {}
  for i = 1, #players, 500 do
    local v = rcall('HMGET', mk or base .. K.names, unpack_(players, i, min(i + 499, #players)))
    for j = 1, #v do out[#out + 1] = v[j] or '' end
  end
  return out
end

-- append_rows adds entries for ZRANGE ... WITHSCORES rows whose first row has rank first. The rows are
-- consecutive, so a row's tieRank is the previous row's when their scores are equal and its own rank otherwise;
-- only the first row's takes a ZCOUNT (none at rank 1). fields: see F_ALL (updatedAt costs a record lookup a row).
-- st.mk, when set, is the names hash to read (a snapshot's).
local function append_rows(st, rows, first, out, fields)
  local players = {}
  for i = 1, #rows, 2 do players[#players + 1] = member_player(rows[i]) end
  local m = {}
  if has(fields, F_META) then m = metas(players, st.mk) end
  local updated, ties = has(fields, F_UPDATED), has(fields, F_TIE)
  local tie, prev = 1, nil
  for k, p in ipairs(players) do
    local ts = 0
    if updated then ts = rec_ts(rcall('HGET', record_key(st, phash(st, p)), p)) or 0 end
    local x = tonum(rows[2 * k])
    if k == 1 then
      if first > 1 and ties then tie = rcall('ZCOUNT', st.z, '-inf', '(' .. rows[2]) + 1 end
    elseif x ~= prev then
      tie = first + k - 1
    end
    prev = x
    if not ties then tie = 0 end
    out[#out + 1] = { p, first + k - 1, 0, rows[2 * k], ts, m[k] or '', tie }
  end
  return out
end

-- around_window(r, n, radius) gives the first and last 0-based rank of the aroundMe window of rank r among n.
-- @around (rendered from aroundplain.go)

-- publish announces changes ({window, period, player, previous rank (0: none), rank (0: removed), previous
-- internal score ('' : none), internal score ('': removed), players in the window period after}) on the board's
-- channel with the next version of the board's counter and its epoch, and returns those (nothing when it
-- published nothing).
local function publish(pubcmd, channel, changes)
  if #changes == 0 or pubcmd == '' then return end
  local ck = base .. K.counters
  local ver = rcall('HINCRBY', ck, 'ver', 1)
  local ep = rcall('HGET', ck, 'ep')
  if ver == 1 or not ep then
    local t = rcall('TIME')
    ep = t[1] .. sformat('%06d', tonum(t[2]))
    rcall('HSET', ck, 'ep', ep)
  end
  rcall(pubcmd, channel, cjson.encode({ e = ep, v = ver, c = changes }))
  return ep, ver
end

-- season_state reads the SEASON window's state (key 'season' above); ids are nil while no season ever started.
local function season_state()
  local v = rcall('HMGET', base .. K.season, 'cur', 'cs', 'ce', 'cx', 'prev', 'ps', 'pe', 'px', 'gms', 'grace')
  return { cur = v[1] or nil, cs = tonum(v[2]), ce = tonum(v[3]), cx = tonum(v[4]), prev = v[5] or nil,
    ps = tonum(v[6]), pe = tonum(v[7]), px = tonum(v[8]), gms = tonum(v[9]) or (tonum(v[10]) or 0) * 1000 }
end

-- season_of returns the season that a score achieved at ts (unix s) counts for at nowms (unix ms), and its keys'
-- expiry: the latest or the one before, if it ran at ts (start <= ts < end: whole seconds) and nowms is before its
-- end plus the board's grace. In milliseconds, as Go's close check compares (Board.closedAt): a season closes at
-- the same moment for both. nil: none (the SEASON window skips the score).
local function season_of(ss, ts, nowms)
  if ss.cur and ss.cs <= ts and ts < ss.ce and nowms < ss.ce * 1000 + ss.gms then return ss.cur, ss.cx end
  if ss.prev and ss.ps <= ts and ts < ss.pe and nowms < ss.pe * 1000 + ss.gms then return ss.prev, ss.px end
  return nil
end
