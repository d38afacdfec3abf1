-- top returns ranks offset+1 .. offset+count of a window period from the exact ranking.
-- ARGV: definition SHA-1, window code, period, offset, count. Reply: {size, entry...} with entries as in
-- common.lua's entry().
local bad = check_def(ARGV[1])
if bad then return bad end
local st = load_state(ARGV[2], ARGV[3], true)
local offset, count = tonum(ARGV[4]), tonum(ARGV[5])
local out = { st.cnt }
if count <= 0 then return out end
local rows = rcall('ZRANGE', st.z, offset, offset + count - 1, 'WITHSCORES')
return append_rows(st, rows, offset + 1, out, F_ALL)
