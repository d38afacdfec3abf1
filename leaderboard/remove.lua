-- remove deletes a player from the given window periods of a board, histogram and records included, and
-- publishes the change. ARGV: player, publish command ('' for none), channel, then pairs of window code and
-- period. Reply: number of periods the player was removed from.
local player, pubcmd, channel = ARGV[1], ARGV[2], ARGV[3]
local removed = 0
local changes = {}
for i = 4, #ARGV - 1, 2 do
  local st = load_state(ARGV[i], ARGV[i + 1])
  local rk, rec, _, tok, x, exact = locate(st, player)
  if rec then
    local rank = rank_of(st, player, tok, x, exact)
    if exact then
      redis.call('ZREM', zkey(st.w, st.p), b62(tok) .. player)
    else
      hist_count(st, hidx(x), -1)
      if st.tn <= 0 then
        redis.call('HDEL', skey(st.w, st.p), 'tn', 'tb')
      else
        redis.call('HSET', skey(st.w, st.p), 'tn', st.tn)
      end
    end
    redis.call('HDEL', rk, player)
    redis.call('HINCRBY', skey(st.w, st.p), 'cnt', -1)
    removed = removed + 1
    changes[#changes + 1] = { st.w, st.p, player, rank, 0 }
  end
end
redis.call('HDEL', base .. 'm', player)
if #changes > 0 and pubcmd ~= '' then
  local ver = redis.call('HINCRBY', base .. 'c', 'ver', 1)
  redis.call(pubcmd, channel, cjson.encode({ v = ver, c = changes }))
end
return removed
