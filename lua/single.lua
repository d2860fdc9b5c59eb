-- single.lua: the driver of the single-key scripts, the last part of each of
-- "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket" and "gcra" (see
-- lua/CMakeLists.txt; a lone fixed window needs no script: server/backend/script_codec.h). It
-- runs the one algorithm its script holds on one key, the algorithm's body inline.
--
-- Calling contract (lua/README.md):
--   EVALSHA <sha> 1 <key> <args>
--   KEYS[1]  the storage key; any bytes. The script touches no other key.
--   ARGV[1]  struct.pack("<dddddd", now, limit, period_us, burst, hits, charge), 48 bytes, every
--            value an integer: now, the caller's clock in microseconds since the Unix epoch,
--            |now| < 2^52; limit in [1, 2^53) (Sluice decides a limit of 0 itself, without
--            Redis); period_us in [1, 2^50]; burst in [0, 2^53) (ignored by the window
--            algorithms); hits in [0, 2^53); charge 0 (if_admitted) or 1 (always: a denial of
--            hits > 0 is charged too; sluice::Charge).
--   Reply:   struct.pack("<ddddd", allowed (1/0), remaining, retry_after_us, reset_after_us,
--            delay_us), 40 bytes: the fields of sluice::Decision (server/algorithm/algorithm.h),
--            bit for bit what the C++ decides.
--   The text form, for people and redis-benchmark: 5 or 6 decimal arguments now, limit,
--   period_us, burst, hits[, charge] instead of the packed one (charge 0 when left out), and the
--   reply the array of 5 integers {allowed, remaining, retry_after_us, reset_after_us,
--   delay_us}. Same decisions, dearer for Redis.
--   A malformed call (wrong number of keys or arguments, a wrong length, a value that is not an
--   integer in its range) is an error reply "ERR sluice <algorithm>: ...", and nothing is read or
--   written.
-- An admitted request, or a denied one that is charged, writes the key's new state with a TTL
-- of reset_after_us rounded up to whole milliseconds (at least 1 ms), or deletes it when
-- reset_after_us is 0 (the state then decides like a fresh key). Any other denied request writes
-- nothing and leaves the TTL alone.
--
-- Packed doubles rather than decimal text: Redis 7.0 spends about 0.3 us per tonumber() and
-- about 1.5 us turning a 5-element table into a reply; one struct.unpack and one packed string
-- cost a fraction of that (lua/README.md has the measurements).

local now, limit, period, burst, hits, charge
local text = #ARGV ~= 1 -- the text form (for redis-cli and redis-benchmark), see above
if not text and #KEYS == 1 and #ARGV[1] == 48 then
  now, limit, period, burst, hits, charge = struct.unpack("<dddddd", ARGV[1])
elseif #ARGV == 5 or #ARGV == 6 then
  now, limit, period, burst, hits, charge =
    tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
    tonumber(ARGV[6] or "0")
  if #KEYS ~= 1 or not (now and limit and period and burst and hits and charge) then
    return argument_error(SCRIPT, string.format(
      "expected 1 key and 5 or 6 decimal arguments (now, limit, period_us, burst, hits[, " ..
      "charge]), got %d keys and arguments '%s' '%s' '%s' '%s' '%s' '%s'", #KEYS, ARGV[1],
      ARGV[2], ARGV[3], ARGV[4], ARGV[5], tostring(ARGV[6])))
  end
else
  return argument_error(SCRIPT, string.format(
    "expected 1 key and 1 argument of 48 bytes (now, limit, period_us, burst, hits, charge as " ..
    "little-endian doubles) or 5 or 6 decimal arguments, got %d keys, %d arguments", #KEYS,
    #ARGV))
end
-- Integers in range (x % 1 is NaN for infinities and NaN, and every comparison with NaN is
-- false).
if not (now > -MAX_NOW and now < MAX_NOW and now % 1 == 0 and
    limit >= 1 and limit < TWO_53 and limit % 1 == 0 and
    period >= 1 and period <= MAX_PERIOD and period % 1 == 0 and
    burst >= 0 and burst < TWO_53 and burst % 1 == 0 and
    hits >= 0 and hits < TWO_53 and hits % 1 == 0 and (charge == 0 or charge == 1 or charge == 2)) then
  return argument_error(SCRIPT, nil, nil, now, limit, period, burst, hits, 1, charge)
end
local key = KEYS[1]
local allowed, remaining, retry, reset, delay, write, a, b, c, d
-- @evaluate inline
-- Tests on the charge only past an admission: they cost every call otherwise.
if allowed then
  commit(key, reset, write, a, b, c, d)
elseif charge ~= 0 and (charge == 2 or hits > 0) then
  commit(key, reset, write, a, b, c, d)
  if charge == 2 then
    allowed, retry = true, 0 -- a refund is never denied (and has no delay: see the bodies)
  end
end
if text then
  return {allowed and 1 or 0, remaining, retry, reset, delay}
end
return struct.pack("<ddddd", allowed and 1 or 0, remaining, retry, reset, delay)
