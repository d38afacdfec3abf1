-- fence reads the close fence of a window period (fence_key in common.lua). ARGV: definition SHA-1, window code,
-- period. Reply: {} while the period is open; else {outbox id of its close event ('' for none), PTTL of the fence
-- (ms, -1: no expiry)}.
local bad = check_def(ARGV[1])
if bad then return bad end
local fk = fence_key(ARGV[2], ARGV[3])
local id = rcall('GET', fk)
if not id then return {} end
return { id, rcall('PTTL', fk) }
