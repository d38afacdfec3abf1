-- watch sets the board's watch key for ARGV[1] ms unless the board is gone (so that a deleted board never gets
-- a key again). Reply: 1, or 0 when there is no board.
if rcall('EXISTS', base .. K.def) == 0 then return 0 end
rcall('SET', base .. K.watch, '1', 'PX', ARGV[1])
return 1
