-- snapkeys renews the TTL of every key of a snapshot (snapshot.lua), or with a TTL of 0 deletes them (UNLINK:
-- a large sorted set is freed off Redis's main thread).
-- ARGV: snapshot id, TTL (ms; 0: delete). Reply: 1, or 0 when the snapshot is gone.
local sb = snap_base(ARGV[1])
local sk = sb .. 's'
local nb = tonum(rcall('HGET', sk, 'nb'))
if not nb then return 0 end
local ttl = tonum(ARGV[2])
local function each(k)
  if ttl > 0 then rcall('PEXPIRE', k, ttl) else rcall('UNLINK', k) end
end
for i = 0, nb - 1 do each(sb .. 'r:' .. sformat('%d', i)) end
each(sb .. 'z')
each(sb .. 'm')
each(sk)
return 1
