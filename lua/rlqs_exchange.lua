-- rlqs_exchange.lua: the whole "rlqs_exchange" script. Replicas serving Envoy's quota streams
-- (server/quota/) share their Envoys' demand per bucket here, so that each divides a bucket's
-- limit over every Envoy of every replica.
--
--   EVALSHA <sha> N <bucket key 1> ... <bucket key N> <replica> <pack("<d", ttl_ms)>
--           <demands 1> ... <demands N>
--   KEYS[i]     a hash per bucket: field = replica, value = pack("<d", written at, ms) ..
--               that replica's demands (requests a second, one double per Envoy)
--   demands i   this replica's demands for bucket i, packed doubles (may be empty)
--   Reply:      N strings: bucket i's demands of the other replicas, packed doubles, those
--               written within ttl_ms of now only (older fields are deleted as they are met)
-- The time is Redis' own (TIME), the one clock every replica shares: a replica's clock skew
-- cannot keep its entries alive, and a field dated more than ttl_ms ahead of now (a master whose
-- clock is behind its predecessor's after a failover) is deleted as stale.
-- Each call writes this replica's field and sets the hash's TTL to ttl_ms, so a replica that
-- stops calling leaves the demand within ttl_ms, and a bucket nobody calls for is gone then.
-- A malformed call is an error reply "ERR sluice rlqs_exchange: ...", and nothing is written.
local n = #KEYS
if #ARGV ~= n + 2 or n == 0 or #ARGV[2] ~= 8 or #ARGV[1] == 0 then
  return redis.error_reply(string.format(
    "ERR sluice rlqs_exchange: expected N >= 1 keys, a replica, 8 bytes of ttl, and " ..
    "N demand strings; got %d keys, %d arguments", n, #ARGV))
end
local replica = ARGV[1]
local ttl = struct.unpack("<d", ARGV[2])
if not (ttl >= 1 and ttl % 1 == 0) then
  return redis.error_reply("ERR sluice rlqs_exchange: ttl_ms must be an integer >= 1")
end
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
for i = 1, n do
  if #ARGV[2 + i] % 8 ~= 0 then
    return redis.error_reply(string.format(
      "ERR sluice rlqs_exchange: demands of key %d are %d bytes, not whole doubles", i,
      #ARGV[2 + i]))
  end
end
local stamp = struct.pack("<d", now)
local reply = {}
for i = 1, n do
  local key = KEYS[i]
  redis.call("HSET", key, replica, stamp .. ARGV[2 + i])
  redis.call("PEXPIRE", key, string.format("%d", ttl))
  local all = redis.call("HGETALL", key)
  local others = {}
  for j = 1, #all, 2 do
    local field, value = all[j], all[j + 1]
    if field ~= replica then
      local written = #value >= 8 and struct.unpack("<d", value) or -1
      if written < 0 or now - written > ttl or written - now > ttl then
        redis.call("HDEL", key, field)
      else
        others[#others + 1] = string.sub(value, 9)
      end
    end
  end
  reply[i] = table.concat(others)
end
return reply
