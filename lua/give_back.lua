-- give_back.lua: the whole "give_back" script. A lone fixed window runs without a script
-- (INCRBY + PEXPIRE NX on its window key, server/backend/script_codec.h); when that request is
-- denied, Sluice calls this to return its hits, so that at rest the window holds what the memory
-- backend would.
--
--   EVALSHA <sha> 1 <window key> <hits>    hits: a decimal integer
--   Reply: the count after, or nil when the key is gone.
--
-- A key that expired meanwhile is left alone: its window is over, and a plain DECRBY would
-- create it with a negative count that the next requests of a late clock would see as room.
if redis.call("EXISTS", KEYS[1]) == 1 then
  return redis.call("DECRBY", KEYS[1], ARGV[1])
end
return nil
