-- top returns ranks offset+1 .. offset+count of a window period from the exact ranking.
-- ARGV: window code, period, offset, count. Reply: {size, entry...} with entries as in common.lua's entry().
local st = load_state(ARGV[1], ARGV[2])
local offset, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local out = { st.cnt }
if count <= 0 then return out end
local rows = redis.call('ZRANGE', zkey(st.w, st.p), offset, offset + count - 1, 'WITHSCORES')
return append_rows(st, rows, offset + 1, out)
