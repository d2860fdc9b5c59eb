-- give_back.lua: the whole "give_back" script. A lone fixed window runs without a script
-- (INCRBY + PEXPIRE NX on its window key, server/backend/script_codec.h). Sluice calls this to
-- return hits to it: a denied request's, so that at rest the window holds what the memory
-- backend would, and a refund's (GiveBackFixedWindow).
--
--   EVALSHA <sha> 1 <window key> <hits>    hits: a decimal integer
--   Reply: the count after, or nil when the key is gone.
--
-- The count never goes below 0 (nothing is banked for later requests), and its TTL is kept. A
-- key that expired meanwhile is left alone: its window is over, and a plain DECRBY would create
-- it with a negative count that the next requests of a late clock would see as room.
if redis.call("EXISTS", KEYS[1]) == 1 then
  local count = redis.call("DECRBY", KEYS[1], ARGV[1])
  if count < 0 then
    redis.call("SET", KEYS[1], "0", "KEEPTTL")
    count = 0
  end
  return count
end
return nil
