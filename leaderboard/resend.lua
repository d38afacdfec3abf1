-- resend puts close events back into the board's outbox (KEYS[2]) that the ledger says went out and were not
-- delivered to every webhook, when the outbox no longer holds them (Redis lost it: a FLUSHALL, a restart without
-- persistence; or it trimmed them). An event is held when an entry of the outbox has its first outbox id as its
-- own id or as its 'first' field (an entry sent again). An entry sent again carries the fields close.lua writes,
-- with the first recordedAt, and 'first' (the first outbox id, which the event's id keeps) and 'resent' (now).
-- Nothing when the board's definition is not there (deleted, or being restored: the restore sends them at its
-- end). ARGV: board id, now (unix ms), the most entries the outbox keeps, then per event 9 values: first outbox
-- id, window name, period, endedAt, recordedAt, size, top (JSON rows), version, reason.
-- Reply: the first outbox ids of the events put back.
if rcall('EXISTS', base .. K.def) == 0 then return {} end
local board, now, maxlen = ARGV[1], ARGV[2], ARGV[3]
local held = {}
for _, m in ipairs(rcall('XRANGE', KEYS[2], '-', '+')) do
  held[m[1]] = true
  local f = m[2]
  for j = 1, #f, 2 do
    if f[j] == 'first' then held[f[j + 1]] = true end
  end
end
local out = {}
for i = 4, #ARGV, 9 do
  local first, ver = ARGV[i], ARGV[i + 7]
  if not held[first] then
    local fields = { 'board', board, 'window', ARGV[i + 1], 'period', ARGV[i + 2], 'endedAt', ARGV[i + 3],
      'recordedAt', ARGV[i + 4], 'size', ARGV[i + 5], 'top', ARGV[i + 6] }
    if ver ~= '1' then
      fields[#fields + 1] = 'version'
      fields[#fields + 1] = ver
      fields[#fields + 1] = 'reason'
      fields[#fields + 1] = ARGV[i + 8]
    end
    fields[#fields + 1] = 'first'
    fields[#fields + 1] = first
    fields[#fields + 1] = 'resent'
    fields[#fields + 1] = now
    rcall('XADD', KEYS[2], 'MAXLEN', maxlen, '*', unpack(fields))
    held[first] = true
    out[#out + 1] = first
  end
end
return out
