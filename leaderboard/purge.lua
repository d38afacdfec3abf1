-- purge deletes one batch of the keys of a deleted board (KEYS[2..], found by SCAN) while the board's tombstone
-- still holds this deletion's token (ARGV[1]); with ARGV[2] == 'done' and no keys it removes the tombstone, which
-- lets the id be created again. UNLINK frees large values off Redis's main thread, so a batch stays short
-- whatever the size of the sorted sets and hashes in it.
-- Reply: number of keys deleted, or -1 when the tombstone is gone or belongs to another deletion (stop).
local tomb = base .. K.tomb
if rcall('GET', tomb) ~= ARGV[1] then return -1 end
local n = 0
for i = 2, #KEYS do
  local k = KEYS[i]
  if k ~= tomb and ssub(k, 1, #base) == base then n = n + rcall('UNLINK', k) end
end
if ARGV[2] == 'done' then rcall('DEL', tomb) end
return n
