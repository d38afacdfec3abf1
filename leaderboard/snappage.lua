-- snappage returns ranks offset+1 .. offset+count of a snapshot (snapshot.lua), as top.lua does of the live
-- ranking: every part of a row is read from the snapshot's keys.
-- ARGV: snapshot id, offset, count, and 't' to add each row's arrival token after its entry (a sharded board's
-- export merges its shards' snapshots by score, then token: shardsnap.go). Reply: {size, entry...} with entries as
-- in common.lua's entry().
local sb = snap_base(ARGV[1])
local v = rcall('HMGET', sb .. 's', 'cnt', 'lvl', 'sp', 'hv')
if not v[1] then
  return redis.error_reply('LB_NOT_FOUND the export snapshot is gone (its board was deleted, or it expired)')
end
local st = { cnt = v[1] + 0, lvl = v[2] + 0, sp = v[3] + 0, hv = v[4] + 0, z = sb .. 'z', rp = sb .. 'r:',
  mk = sb .. 'm' }
local offset, count = tonum(ARGV[2]), tonum(ARGV[3])
local out = { st.cnt }
if count <= 0 then return out end
local rows = rcall('ZRANGE', st.z, offset, offset + count - 1, 'WITHSCORES')
append_rows(st, rows, offset + 1, out, F_ALL)
if ARGV[4] == 't' then
  for k = 1, #rows / 2 do
    local m = rows[2 * k - 1]
    out[k + 1][8] = ssub(m, 1, token_len(m) or 0)
  end
end
return out
