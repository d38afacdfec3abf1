-- ranks returns the entries of the given players in a window period; players without a score are left out.
-- ARGV: definition SHA-1, window code, period, fields (see F_ALL; + 8: the version too), player ids... Reply:
-- {size, entry...}, with the version {size, epoch of the board's change events ('': none yet), version, entry...}.
local bad = check_def(ARGV[1])
if bad then return bad end
local st = load_state(ARGV[2], ARGV[3], true)
local fields = tonum(ARGV[4])
local out = { st.cnt }
if has(fields, F_VERSION) then
  local v = rcall('HMGET', base .. K.counters, 'ep', 'ver')
  out[2], out[3] = v[1] or '', tonum(v[2]) or 0
end
local off = #out
local found = entries(st, ARGV, 5, fields, out)
if has(fields, F_META) and #found > 0 then
  local m = metas(found) -- one HMGET for all of them
  for k = 1, #found do out[k + off][6] = m[k] end
end
return out
