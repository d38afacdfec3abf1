-- mark takes a ledgered event that changes nothing in the index by itself through the gate (a void: the rebuild
-- after it recomputes the board from the events that still count), and marks the board (c.void) until that
-- rebuild is done: a restore or a ledger check that finds the mark rebuilds it, so a void whose rebuild failed
-- still ends up counted. ARGV: definition SHA-1.
local bad = check_def(ARGV[1])
if bad then return bad end
if not LG.restore then rcall('HSET', base .. K.counters, 'void', LG.last) end
return 'ok'
