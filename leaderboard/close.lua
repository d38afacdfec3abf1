-- close closes periods of a board: for each period given that has no close fence yet (fence_key), it records the
-- period's close event in the board's outbox if the period received at least one score (or force is set): its
-- size and its top n, read in this same step; and it sets the fence, which every script that writes a period
-- checks. From then on the period's standings are final and are what the event announced. A fenced period that
-- closed without an event ('' fence) records one when force is set.
-- With the ledger (mode 'f') the event waits: the fence is set to '~' (closed, standings not yet frozen), the
-- standings are frozen in the ledger, and mode 'a' then sends the event with the frozen standings and sets the
-- fence to its outbox id (see freeze.go). Mode 'a' also sends a correction (a later version, after a void).
-- KEYS[2]: the outbox stream (see outboxKey in keys.go). ARGV: definition SHA-1, board id, n, now (unix ms, the
-- caller's clock), the most entries the outbox keeps, force ('1' or '0'), mode ('e': the event now; 'f': the fence
-- only; 'a': announce), then per period: modes 'e' and 'f' 5 values: window code, window name, period key,
-- endedAt (unix ms), the least TTL of the fence (s); mode 'a' 9 values: window code, window name, period key,
-- endedAt, size, top (JSON rows), version, reason, the outbox id that announced this version already ('' none).
-- Reply: per period given, the outbox id of its event (recorded now or earlier, '' when it has none, '~' when it
-- waits for its freeze) and '1' when this call recorded it (mode 'f': set the fence), else '0'.
local bad = check_def(ARGV[1])
if bad then return bad end
local board, n, now, maxlen, force, mode = ARGV[2], tonum(ARGV[3]), ARGV[4], ARGV[5], ARGV[6] == '1', ARGV[7]
local out = {}

if mode == 'a' then
  for i = 8, #ARGV, 9 do
    local w, wname, p, ended, size, top, ver, reason, known = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
      ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8]
    local fk = fence_key(w, p)
    local id, new = rcall('GET', fk), '0'
    if known ~= '' then
      -- Sent before (and recorded in the ledger): a restore left the fence waiting.
      if id == '~' then rcall('SET', fk, known, 'KEEPTTL') end
      id = known
    elseif id == '~' or ver ~= '1' then
      local fields = { 'board', board, 'window', wname, 'period', p, 'endedAt', ended, 'recordedAt', now,
        'size', size, 'top', top }
      if ver ~= '1' then
        fields[#fields + 1] = 'version'
        fields[#fields + 1] = ver
        fields[#fields + 1] = 'reason'
        fields[#fields + 1] = reason
      end
      id = rcall('XADD', KEYS[2], 'MAXLEN', maxlen, '*', unpack(fields))
      new = '1'
      if rcall('EXISTS', fk) == 1 then rcall('SET', fk, id, 'KEEPTTL') end
    end
    out[#out + 1] = id or ''
    out[#out + 1] = new
  end
  return out
end

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

-- Mode 'F' is mode 'f' on shard 0 of a sharded board with the ledger (shardledger.go): a period has a sixth value, '1'
-- when another shard has players in it, which forces it here (shard 0 announces every shard's close).
local step = mode == 'F' and 6 or 5
for i = 8, #ARGV, step do
  local w, wname, p, ended, ttl = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonum(ARGV[i + 4])
  local force = force or (mode == 'F' and ARGV[i + 5] == '1')
  local fk = fence_key(w, p)
  local id, new = rcall('GET', fk), '0'
  if not id or (id == '' and force) then
    id = ''
    if (force or rcall('EXISTS', skey(w, p)) == 1) and mode ~= 'e' then
      -- With the ledger the event waits for the freeze; a restore sets the fence waiting too, and the close check
      -- finds the event the ledger says went out, or sends it.
      id, new = '~', '1'
    elseif force or rcall('EXISTS', skey(w, p)) == 1 then
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
