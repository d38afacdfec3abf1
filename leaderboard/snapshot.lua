-- snapshot copies what an export lists of a window period, as it is at this moment, to keys of its own
-- (snap_base): the exact ranking (ranks, order, scores), the records of its players (updatedAt), their names and
-- metadata, and the period's size (topPercent). Copying them in one script is what makes them one moment: a row's
-- name, score and updatedAt come from the same submission, and every player of the ranking is there once. The
-- tail of an exactTop board is not listed (as with top), so its histogram is not needed.
-- A part is copied whole (COPY: a record hash is one listpack, copied as a block) unless most of it is not
-- listed: the records of an exactTop board with a long tail, the names of a board whose other windows and periods
-- have many more players. Then only the listed players' entries are copied, EXTRACT_RATIO being where that gets
-- cheaper (a copied entry costs a fraction of one looked up in Lua).
-- ARGV: definition SHA-1, window code, period, snapshot id, TTL (ms) of every copied key.
-- Reply: {rows, size, tail}: the players of the exact ranking (the rows Page lists) and of the window period, and
-- where its tail may begin (tail_bound: a sharded board's export ends its exact tier there, shardsnap.go).
local bad = check_def(ARGV[1])
if bad then return bad end
local EXTRACT_RATIO = 4
local st = load_state(ARGV[2], ARGV[3], true)
local sb = snap_base(ARGV[4])
local sk, sz, sm, srp = sb .. 's', sb .. 'z', sb .. 'm', sb .. 'r:'
local ttl = ARGV[5]
if rcall('EXISTS', sk) == 1 then return redis.error_reply('LB_CONFLICT snapshot id in use') end
local rows = rcall('ZCARD', st.z)
local nb = 2 ^ st.lvl + st.sp -- record hashes 0 .. nb - 1 (see record_key)
local mk = base .. K.names
local copyRecs = rows * EXTRACT_RATIO >= st.cnt
local copyNames = rcall('HLEN', mk) <= rows * EXTRACT_RATIO

if rows > 0 then
  rcall('COPY', st.z, sz)
  rcall('PEXPIRE', sz, ttl)
end
if copyRecs then
  for i = 0, nb - 1 do
    local rk = srp .. sformat('%d', i)
    if rcall('COPY', st.rp .. sformat('%d', i), rk) == 1 then rcall('PEXPIRE', rk, ttl) end
  end
end
if copyNames and rcall('COPY', mk, sm) == 1 then rcall('PEXPIRE', sm, ttl) end
if not (copyRecs and copyNames) then
  local rpn = #st.rp
  for off = 0, rows - 1, 1000 do
    local members = rcall('ZRANGE', st.z, off, off + 999)
    local ids = {}
    for i = 1, #members do ids[i] = member_player(members[i]) end
    if not copyRecs then
      for _, id in ipairs(ids) do
        local rk = record_key(st, phash(st, id))
        local rec = rcall('HGET', rk, id)
        if rec then
          local to = srp .. ssub(rk, rpn + 1)
          rcall('HSET', to, id, rec)
          rcall('PEXPIRE', to, ttl)
        end
      end
    end
    if not copyNames then
      local v = rcall('HMGET', mk, unpack_(ids))
      local kv = {}
      for i = 1, #ids do
        if v[i] then
          kv[#kv + 1] = ids[i]
          kv[#kv + 1] = v[i]
        end
      end
      if #kv > 0 then rcall('HSET', sm, unpack_(kv)) end
    end
  end
  if not copyNames then rcall('PEXPIRE', sm, ttl) end
end
rcall('HSET', sk, 'cnt', st.cnt, 'lvl', st.lvl, 'sp', st.sp, 'hv', st.hv, 'rows', rows, 'nb', nb)
rcall('PEXPIRE', sk, ttl)
return { rows, st.cnt, tail_bound(st) }
