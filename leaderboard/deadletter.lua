-- deadletter gives up an event of the board's outbox (KEYS[2]) for consumer group ARGV[1]: it appends it to the
-- board's dead-letter stream (KEYS[3]; fields outbox = ARGV[2], group, reason = ARGV[3]; the newest ARGV[4] kept)
-- and acknowledges it, in one step; nothing when the board no longer exists (a deletion purges its outbox, and a
-- dead-letter stream written after that would outlive it). Reply: 1 when it gave the event up, 0 for no board.
if rcall('EXISTS', base .. K.def) == 0 then return 0 end
rcall('XADD', KEYS[3], 'MAXLEN', ARGV[4], '*', 'outbox', ARGV[2], 'group', ARGV[1], 'reason', ARGV[3])
rcall('XACK', KEYS[2], ARGV[1], ARGV[2])
return 1
