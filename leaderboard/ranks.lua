-- ranks returns the entries of the given players in a window period; players without a score are left out.
-- ARGV: window code, period, player ids... Reply: {size, entry...}.
local st = load_state(ARGV[1], ARGV[2])
local out = { st.cnt }
for i = 3, #ARGV do
  local e = entry(st, ARGV[i], true)
  if e then out[#out + 1] = e end
end
return out
