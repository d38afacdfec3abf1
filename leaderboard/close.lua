-- close closes periods of a board: for each period given that has no close fence yet (fence_key), it records the
-- period's close event in the board's outbox if the period received at least one score (or force is set): its
-- size and its top n, read in this same step; and it sets the fence, which every script that writes a period
-- checks. From then on the period's standings are final and are what the event announced. A fenced period that
-- closed without an event ('' fence) records one when force is set.
-- KEYS[2]: the outbox stream (see outboxKey in close.go). ARGV: definition SHA-1, board id, n, now (unix ms, the
-- caller's clock), the most entries the outbox keeps, force ('1' or '0'), then 5 values per period: window code,
-- window name, period key, endedAt (unix ms), the least TTL of the fence (s).
-- Reply: per period given, the outbox id of its event (recorded now or earlier, '' when it has none) and
-- '1' when this call recorded it, else '0'.
local bad = check_def(ARGV[1])
if bad then return bad end
local board, n, now, maxlen, force = ARGV[2], tonum(ARGV[3]), ARGV[4], ARGV[5], ARGV[6] == '1'
local out = {}

-- fence_ttl returns how long (ms) the fence of a window period must live: ttl seconds, or longer if one of the
-- period's keys lives longer (-1: as long as a key without expiry). The state and the sorted set get the same TTL
-- as every other key of the period at every write, and nothing writes a fenced period.
local function fence_ttl(w, p, ttl)
  local ms = ttl * 1000
  for _, k in ipairs({ skey(w, p), zkey(w, p) }) do
    local t = rcall('PTTL', k)
    if t == -1 then return -1 end
    if t > ms then ms = t end
  end
  return ms
end

for i = 7, #ARGV, 5 do
  local w, wname, p, ended, ttl = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonum(ARGV[i + 4])
  local fk = fence_key(w, p)
  local id, new = rcall('GET', fk), '0'
  if not id or (id == '' and force) then
    id = ''
    -- A restore (ledgered, see common.lua) sets the fences again where the ledger's closes were, but sends no
    -- event: it went out when the period closed.
    if (force or rcall('EXISTS', skey(w, p)) == 1) and not (LG and LG.restore) then
      local st = load_state(w, p)
      local top = {}
      if n > 0 then append_rows(st, rcall('ZRANGE', zkey(w, p), 0, n - 1, 'WITHSCORES'), 1, top, F_ALL) end
      id = rcall('XADD', KEYS[2], 'MAXLEN', maxlen, '*', 'board', board, 'window', wname, 'period', p,
        'endedAt', ended, 'recordedAt', now, 'size', st.cnt, 'top', cjson.encode(top))
      new = '1'
    end
    local life = fence_ttl(w, p, ttl)
    if life < 0 then
      rcall('SET', fk, id)
    else
      rcall('SET', fk, id, 'PX', life)
    end
  end
  out[#out + 1] = id
  out[#out + 1] = new
end
return out
