-- group.lua: the driver of the "group" script (prelude.lua, search.lua, every algorithm part,
-- then group.lua; see lua/CMakeLists.txt). It decides several keys, of possibly different
-- algorithms, all or nothing: phase 1 decides every key on its stored state without writing
-- anything; phase 2 writes the new states only if every key admitted, except that a key whose
-- rule charges always (charge 1) with hits > 0 is written whatever the group's outcome. The keys
-- of one group must live in one Redis Cluster slot (one hash tag), as for any script.
--
-- Calling contract (lua/README.md):
--   EVALSHA <sha> N <key 1> ... <key N> <args>
--   KEYS[i]  the storage key of check i; the N keys must be distinct. No other key is touched.
--            A fixed window's key is its window's key (server/backend/script_codec.h).
--   ARGV[1]  struct.pack("<d", now) followed by N records struct.pack("<dddddd",
--            algorithm_code, limit, period_us, burst, hits, charge), 8 + 48 * N bytes: check i's
--            algorithm code (0 fixed_window, 1 sliding_window_log, 2 sliding_window_counter,
--            3 token_bucket, 4 leaky_bucket, 5 gcra: sluice::Algorithm) and limit values, ranges
--            as in single.lua. One now for the whole group.
--   Reply:   N records of 40 bytes, in key order: struct.pack("<ddddd", allowed (1/0),
--            remaining, retry_after_us, reset_after_us, delay_us). Each key's decision is the
--            one it makes on its own (as the memory backend reports it): when one key denies,
--            the others may still say allowed, with remaining counted as if they had consumed,
--            yet none of them wrote anything, unless it charges always: such a key is written as
--            its own decision left it (admitted or denied and charged). The caller treats the
--            group as denied if any key is.
--   A malformed call (N = 0, a wrong argument count or length, an unknown algorithm code, a bad
--   number, a repeated key) is an error reply "ERR sluice group: ...", and nothing is read or
--   written.

-- @evaluate functions

local n = #KEYS
local packed = ARGV[1]
if n == 0 or #ARGV ~= 1 or #packed ~= 8 + 48 * n then
  return argument_error(SCRIPT, string.format(
    "expected N >= 1 keys and 1 argument of 8 + 48 * N bytes (now, then algorithm_code, " ..
    "limit, period_us, burst, hits, charge per key, as little-endian doubles), got %d keys, " ..
    "%d arguments, %d bytes", n, #ARGV, #(packed or "")))
end
local now = struct.unpack("<d", packed)
if not (now > -MAX_NOW and now < MAX_NOW and now % 1 == 0) then
  return argument_error(SCRIPT, nil, nil, now)
end
-- Checked whole before anything is read: a flat list of evaluate, limit, period, burst, hits,
-- charge.
local checks = {}
local seen = {}
for i = 1, n do
  local algorithm, limit, period, burst, hits, charge =
    struct.unpack("<dddddd", packed, 9 + 48 * (i - 1))
  local evaluate = algorithms[algorithm]
  if not evaluate then
    return argument_error(SCRIPT, string.format(
      "key %d: unknown algorithm code %.17g (expected 0 to 5)", i, algorithm))
  end
  if not (limit >= 0 and limit < TWO_53 and limit % 1 == 0 and
      period >= 1 and period <= MAX_PERIOD and period % 1 == 0 and
      burst >= 0 and burst < TWO_53 and burst % 1 == 0 and
      hits >= 0 and hits < TWO_53 and hits % 1 == 0 and (charge == 0 or charge == 1 or charge == 2)) then
    return argument_error(SCRIPT, nil, "key " .. i, nil, limit, period, burst, hits, nil, charge)
  end
  local key = KEYS[i]
  if seen[key] then
    return argument_error(SCRIPT, string.format("KEYS[%d] repeats KEYS[%d]", i, seen[key]))
  end
  seen[key] = i
  local at = 6 * (i - 1)
  checks[at + 1], checks[at + 2], checks[at + 3], checks[at + 4], checks[at + 5], checks[at + 6] =
    evaluate, limit, period, burst, hits, charge
end

-- Phase 1: decide every key; keep the state to commit of each key admitted or charged.
local reply = {}
local commits = {}
local all_allowed = true
for i = 1, n do
  local at = 6 * (i - 1)
  local limit, period, hits, charge = checks[at + 2], checks[at + 3], checks[at + 5], checks[at + 6]
  local allowed, remaining, retry, reset, delay, write, a, b, c, d
  if limit == 0 then
    -- ZeroLimitDecision: nothing is ever replenished; the key is neither read nor written. A
    -- refund is decided as a check of 0 hits. The wait is NoLimitWait: a window's rest (its
    -- burst slot, fixed_window.lua), else one period.
    local wait = period
    if checks[at + 1] == algorithms[0] then
      wait = checks[at + 4]
    end
    allowed, remaining, retry, reset, delay = hits == 0 or charge == 2, 0, wait, wait, 0
    if allowed then
      retry = 0
    end
  else
    allowed, remaining, retry, reset, delay, write, a, b, c, d =
      checks[at + 1](KEYS[i], now, limit, period, checks[at + 4], hits, charge)
    -- Charged, or a refund: written whatever the group's outcome.
    local charged = charge == 2 or (charge == 1 and hits > 0)
    if allowed or charged then
      commits[#commits + 1] = {KEYS[i], reset, write, a, b, c, d, charged}
    end
    if charge == 2 then
      allowed, retry, delay = true, 0, 0 -- a refund is never denied, nor denies its group
    end
  end
  reply[i] = struct.pack("<ddddd", allowed and 1 or 0, remaining, retry, reset, delay)
  if not allowed then
    all_allowed = false
  end
end
-- Phase 2: all or nothing, but for the keys that are charged whatever happens.
for i = 1, #commits do
  local w = commits[i]
  if all_allowed or w[8] then
    commit(w[1], w[2], w[3], w[4], w[5], w[6], w[7])
  end
end
return table.concat(reply)
