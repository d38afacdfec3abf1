-- mark takes a ledgered event that changes nothing in the index by itself through the gate (a void: the rebuild
-- after it recomputes the board from the events that still count). ARGV: definition SHA-1.
local bad = check_def(ARGV[1])
if bad then return bad end
return 'ok'
