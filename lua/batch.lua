-- batch.lua: the driver of the batch scripts, the last part of each of "sliding_window_log_batch",
-- "sliding_window_counter_batch", "token_bucket_batch", "leaky_bucket_batch" and "gcra_batch"
-- (see lua/CMakeLists.txt). It decides N independent checks of its one algorithm in one call,
-- in order, the algorithm's body inline: what N single-key calls pipelined back to back would
-- decide, for the fixed cost of one call (an empty EVALSHA alone costs Redis about 1.9 us).
-- Sluice sends one when a request has several lone checks of one algorithm (several
-- descriptors), on a cluster only for checks whose keys share a hash tag.
--
-- Calling contract (lua/README.md):
--   EVALSHA <sha> N <key 1> ... <key N> <args>
--   KEYS[i]  check i's storage key. Keys may repeat: each check is decided on what the checks
--            before it wrote. No other key is touched.
--   ARGV[1]  N records struct.pack("<dddddd", now, limit, period_us, burst, hits, charge),
--            48 * N bytes, check i's as single.lua takes it (each check has its own now; limit
--            at least 1).
--   Reply:   N records of 40 bytes, in key order, each as single.lua's reply.
--   A malformed call (N = 0, a wrong argument count or length) is an error reply
--   "ERR sluice <script>: ...", and nothing is read or written. A record whose value is not an
--   integer in its range is an error reply too ("... key <i>: ..."), but the checks before it
--   have been decided and written: the whole call fails, as when its reply is lost.

local n = #KEYS
local packed = ARGV[1]
if n == 0 or #ARGV ~= 1 or #packed ~= 48 * n then
  return argument_error(SCRIPT, string.format(
    "expected N >= 1 keys and 1 argument of 48 * N bytes (now, limit, period_us, burst, hits, " ..
    "charge per key, as little-endian doubles), got %d keys, %d arguments, %d bytes", n, #ARGV,
    #(packed or "")))
end
-- One pass, each check validated just before it is decided: a second pass, or a table of the
-- unpacked values, costs more than a tenth of a decision (callgrind).
local reply = {}
for i = 1, n do
  local now, limit, period, burst, hits, charge = struct.unpack("<dddddd", packed, 48 * i - 47)
  -- Integers in range, as in single.lua.
  if not (now > -MAX_NOW and now < MAX_NOW and now % 1 == 0 and
      limit >= 1 and limit < TWO_53 and limit % 1 == 0 and
      period >= 1 and period <= MAX_PERIOD and period % 1 == 0 and
      burst >= 0 and burst < TWO_53 and burst % 1 == 0 and
      hits >= 0 and hits < TWO_53 and hits % 1 == 0 and (charge == 0 or charge == 1 or charge == 2)) then
    return argument_error(SCRIPT, nil, "key " .. i, now, limit, period, burst, hits, 1, charge)
  end
  local key = KEYS[i]
  local allowed, remaining, retry, reset, delay, write, a, b, c, d
  -- @evaluate inline
  if allowed then
    commit(key, reset, write, a, b, c, d)
  elseif charge ~= 0 and (charge == 2 or hits > 0) then
    commit(key, reset, write, a, b, c, d)
    if charge == 2 then
      allowed, retry = true, 0 -- a refund is never denied (and has no delay: see the bodies)
    end
  end
  reply[i] = struct.pack("<ddddd", allowed and 1 or 0, remaining, retry, reset, delay)
end
return table.concat(reply)
