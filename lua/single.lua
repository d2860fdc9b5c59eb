-- single.lua: the driver of the single-key scripts, the last part of each of "fixed_window",
-- "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket" and "gcra"
-- (see lua/CMakeLists.txt). It runs the one algorithm its script holds on one key.
--
-- Calling contract (lua/README.md):
--   EVALSHA <sha> 1 <key> <now> <limit> <period_us> <burst> <hits>
--   KEYS[1]  the storage key; any bytes. The script touches no other key.
--   ARGV[1]  now: "" to use Redis' clock (TIME: seconds * 1000000 + microseconds), else the
--            caller's clock in integer microseconds since the Unix epoch, |now| < 2^52.
--   ARGV[2]  limit      integer in [0, 2^53)
--   ARGV[3]  period_us  integer in [1, 2^50]
--   ARGV[4]  burst      integer in [0, 2^53) (ignored by the window algorithms)
--   ARGV[5]  hits       integer in [0, 2^53)
--   Reply:   {allowed (1/0), remaining, retry_after_us, reset_after_us, delay_us}, the fields of
--            sluice::Decision (server/algorithm/algorithm.h), bit for bit what the C++ decides.
--   A malformed call (wrong number of keys or arguments, an argument that is not an integer in
--   its range) is an error reply "ERR sluice <algorithm>: ...", and nothing is read or written.
-- An admitted request writes the key's new state with a TTL of reset_after_us rounded up to
-- whole milliseconds (at least 1 ms), or deletes it when reset_after_us is 0 (the state then
-- decides like a fresh key). A denied request writes nothing and leaves the TTL alone.

local code, evaluate = next(algorithms)
if #KEYS ~= 1 or #ARGV ~= 5 then
  return argument_error(code, string.format(
    "expected 1 key and 5 arguments (now, limit, period_us, burst, hits), got %d and %d",
    #KEYS, #ARGV))
end
local now_text = ARGV[1]
local now = 0
if now_text ~= "" then
  now = tonumber(now_text)
end
local limit, period, burst, hits =
  tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
-- Integers in range (x % 1 is NaN for infinities, and every comparison with NaN is false).
if not (now and now > -MAX_NOW and now < MAX_NOW and now % 1 == 0 and
    limit and limit >= 0 and limit < TWO_53 and limit % 1 == 0 and
    period and period >= 1 and period <= MAX_PERIOD and period % 1 == 0 and
    burst and burst >= 0 and burst < TWO_53 and burst % 1 == 0 and
    hits and hits >= 0 and hits < TWO_53 and hits % 1 == 0) then
  return argument_error(code, nil, 2)
end
if limit == 0 then
  -- ZeroLimitDecision: nothing is ever replenished; the key is neither read nor written.
  if hits == 0 then
    return {1, 0, 0, period, 0}
  end
  return {0, 0, period, period, 0}
end
if now_text == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local key = KEYS[1]
local allowed, remaining, retry, reset, delay, commit, a, b, c, d =
  evaluate(key, now, limit, period, burst, hits)
if allowed then
  -- The TTL: reset_after rounded up to whole milliseconds; 0 drops a state that is fresh again.
  local ttl_ms = 0
  if reset > 0 then
    ttl_ms = math.floor(reset / 1000)
    if ttl_ms * 1000 < reset then
      ttl_ms = ttl_ms + 1
    end
  end
  commit(key, ttl_ms, a, b, c, d)
  return {1, remaining, retry, reset, delay}
end
return {0, remaining, retry, reset, delay}
