-- close records the close events of periods of a board in the board's outbox, once per period: for each period
-- given that has no close mark yet (and that received at least one score, unless force is set), it reads the
-- period's size and its top n and appends one entry to the outbox, then marks the period, in one atomic step.
-- KEYS[2]: the outbox stream (see outboxKey in close.go). ARGV: definition SHA-1, board id, n, now (unix ms, the
-- caller's clock), the most entries the outbox keeps, force ('1' or '0'), then 5 values per period: window code,
-- window name, period key, endedAt (unix ms), TTL of the close mark (s).
-- Reply: per period given, the outbox id of its event (recorded now or earlier, '' when it records none) and
-- '1' when this call recorded it, else '0'.
local bad = check_def(ARGV[1])
if bad then return bad end
local board, n, now, maxlen, force = ARGV[2], tonum(ARGV[3]), ARGV[4], ARGV[5], ARGV[6] == '1'
local out = {}
for i = 7, #ARGV, 5 do
  local w, wname, p, ended, ttl = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonum(ARGV[i + 4])
  local mk = base .. 'x:' .. w .. ':' .. p
  local id, new = rcall('GET', mk), '0'
  if not id then
    id = ''
    if force or rcall('EXISTS', skey(w, p)) == 1 then
      local st = load_state(w, p)
      local top = {}
      if n > 0 then append_rows(st, rcall('ZRANGE', zkey(w, p), 0, n - 1, 'WITHSCORES'), 1, top, F_ALL) end
      id = rcall('XADD', KEYS[2], 'MAXLEN', maxlen, '*', 'board', board, 'window', wname, 'period', p,
        'endedAt', ended, 'recordedAt', now, 'size', st.cnt, 'top', cjson.encode(top))
      rcall('SET', mk, id, 'EX', ttl)
      new = '1'
    end
  end
  out[#out + 1] = id
  out[#out + 1] = new
end
return out
