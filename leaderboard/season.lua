-- season opens or closes seasons of a board's SEASON window (key 'season' and 'seasons' in common.lua), in one
-- step with respect to every submit (submit.lua reads the same state in its own call).
-- ARGV: definition SHA-1, op ('start' | 'end'), now (unix s, the caller's clock), and for 'start': id, endsAt
-- (unix s, after now), key expiry of the new season (unix s), the board's grace (ms).
-- Reply: {status, id, start, end, key expiry, closed id | '', its start, its end, its key expiry}: the latest season
-- after the call and the season this call closed (season_closed), if any ('' fields when none). status: 'started'; 'same' (start of the running season again with the
-- same endsAt: nothing changed); 'ended'; 'none' (end while no season runs: nothing changed). Errors: LB_CONFLICT
-- (start: the id was used before on this board), LB_NOT_FOUND (end: no season ever started).
local bad = check_def(ARGV[1])
if bad then return bad end
local op, now = ARGV[2], tonum(ARGV[3])
local sk, rk, uk = base .. K.season, base .. K.seasons, base .. K.seasons_used
local ss = season_state()

-- season_closed closes the running season at time at: its end becomes at, so scores achieved from then on are
-- not its own, and late ones still reach it until at plus the grace. The one place where a season closes early
-- (one that reaches its endsAt closes by the clock alone); the reply reports it (the reply fields it returns).
local function season_closed(at)
  ss.ce = at
  rcall('HSET', sk, 'ce', at)
  rcall('HSET', rk, ss.cur, ss.cs .. ',' .. at .. ',' .. ss.cx)
  return { ss.cur, ss.cs, at, ss.cx }
end

local closed = { '', '', '', '' }
local function reply(status)
  return { status, ss.cur, ss.cs, ss.ce, ss.cx, closed[1], closed[2], closed[3], closed[4] }
end

if op == 'start' then
  local id, endsAt, exp, gms = ARGV[4], tonum(ARGV[5]), tonum(ARGV[6]), tonum(ARGV[7])
  if rcall('HEXISTS', rk, id) == 1 then
    if id == ss.cur and now < ss.ce and endsAt == ss.ce then
      return reply('same') -- a retry of the start that opened it
    end
    return redis.error_reply('LB_CONFLICT season ' .. id .. ' was already started on this board')
  end
  if rcall('SISMEMBER', uk, id) == 1 then
    return redis.error_reply('LB_CONFLICT season ' .. id .. ' was already started on this board')
  end
  -- Seasons whose keys have expired leave the registry (which Seasons and the close checks read) for the set of
  -- used ids, so the registry holds only the seasons still readable however many ran.
  local all = rcall('HGETALL', rk)
  for i = 1, #all, 2 do
    local x = tonum(string.match(all[i + 1], ',(%d+)$'))
    if x and x <= now then
      rcall('SADD', uk, all[i])
      rcall('HDEL', rk, all[i])
    end
  end
  if ss.cur and now < ss.ce then closed = season_closed(now) end
  if ss.cur then
    rcall('HSET', sk, 'prev', ss.cur, 'ps', ss.cs, 'pe', ss.ce, 'px', ss.cx)
  end
  rcall('HSET', sk, 'cur', id, 'cs', now, 'ce', endsAt, 'cx', exp, 'gms', gms, 'grace', floor(gms / 1000))
  rcall('HSET', rk, id, now .. ',' .. endsAt .. ',' .. exp)
  ss.cur, ss.cs, ss.ce, ss.cx = id, now, endsAt, exp
  return reply('started')
end

if not ss.cur then return redis.error_reply('LB_NOT_FOUND no season has started on this board') end
if now >= ss.ce then return reply('none') end
closed = season_closed(now)
return reply('ended')
