-- around returns up to radius entries above and below a player, the player included, in rank order, filled in
-- at the edges of the exact ranking. A player beyond exactTop gets only their own (estimated) entry.
-- ARGV: definition SHA-1, window code, period, player, radius, fields (see F_ALL). Reply: {size, entry...}.
local bad = check_def(ARGV[1])
if bad then return bad end
local st = load_state(ARGV[2], ARGV[3], true)
local player, radius, fields = ARGV[4], tonum(ARGV[5]), tonum(ARGV[6])
local out = { st.cnt }
local _, rec, ts, tok, x, exact = locate(st, player)
if not rec then return out end
local z = st.z
local r0 = exact and rcall('ZRANK', z, tok .. player)
if not r0 then
  local r = rank_of(st, player, tok, x, false)
  local meta, tie = '', 0
  if not has(fields, F_UPDATED) then ts = 0 end
  if has(fields, F_META) then meta = meta_of(player) end
  if has(fields, F_TIE) then tie = tie_of(st, x, r, false) end
  out[2] = { player, r, 1, fmt(x), ts, meta, tie }
  return out
end
local start, stop = around_window(r0, rcall('ZCARD', z), radius)
local rows = rcall('ZRANGE', z, start, stop, 'WITHSCORES')
return append_rows(st, rows, start + 1, out, fields)
