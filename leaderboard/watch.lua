-- watch sets the board's watch key for ARGV[1] ms unless the board is gone (so that a deleted board never gets
-- a key again). Reply: 1, or 0 when there is no board.
if redis.call('EXISTS', base .. 'def') == 0 then return 0 end
redis.call('SET', base .. 'watch', '1', 'PX', ARGV[1])
return 1
