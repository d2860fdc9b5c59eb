-- prelude.lua: the first part of every algorithm script (see lua/CMakeLists.txt): the argument
-- ranges, the contract of the algorithm bodies, the error reply for malformed calls and the
-- commit of a decided state.
--
-- Cost: Redis runs a script's whole body on every call, so every function a part defines is a
-- closure created on every call, dearer with each upvalue it captures, and every call of a Lua
-- function costs about as much as a dozen arithmetic lines (callgrind: about 650 instructions
-- for a call with 8 arguments). Parts therefore define only what their scripts use, call
-- library functions by their global names (redis.call, struct.pack) rather than capture local
-- copies, and parse nothing they can avoid; the single-key scripts run their algorithm's body
-- inline, and the drivers check arguments inline.
--
-- Numbers: Lua 5.1 has only doubles, so every integer the scripts handle (times, durations,
-- counts) stays below 2^53 to be exact; the drivers' argument ranges keep every intermediate
-- value there.
--
-- State: string states are struct.pack("<B" .. "d"...) records: the algorithm's code, then
-- doubles, which read back bit for bit (times and counts are integers below 2^53, exact as
-- doubles). A value of another length or code is not this algorithm's: a fresh key.

local TWO_53 = 9007199254740992 -- 2^53: doubles hold every integer up to here exactly
local MAX_NOW = 4503599627370496 -- 2^52 us (year 2112): |now| stays below
local MAX_PERIOD = 1125899906842624 -- 2^50 us (35.7 years): now + 4 periods stays below 2^53

-- The algorithm bodies (lua/README.md, "Composition"). An algorithm part's text below its line
-- "-- evaluate <code>" (the code of sluice::Algorithm) is its body: a driver gets it either inline
-- (the single-key scripts: no function to create or call) or as algorithms[code], a function
-- of (key, now, limit, period, burst, hits, charge) (the group script). The body runs with those
-- seven in scope (charge 1: the rule charges always, so a denial of hits > 0 is charged and
-- written like an admission, sluice::Charge::kAlways; 0: it is not; 2: a refund, sluice::Refund:
-- the body gives back up to `hits` to the state it read, at now, sets hits to 0 and decides on
-- with no delay, and the driver then writes the state whatever the verdict and answers allowed,
-- retry 0), limit > 0 (the single-key and
-- batch drivers refuse limit 0, which Sluice decides without Redis; the group driver answers it
-- as ZeroLimitDecision, without touching the key); it reads the key, decides, and assigns (never
-- declares)
--   allowed (boolean), remaining, retry, reset, delay: the decision (retry, reset and delay in
--     microseconds: retry_after_us, reset_after_us, delay_us);
--   write, a, b, c, d: how to store the decided state, for commit below, which the driver calls
--     when `allowed or charge == 2 or (charge == 1 and hits > 0)`, a test made only on a denial. A string state leaves write nil and sets a = the value
--     read (false: none; a wrong type reads as an error table, which is replaced) and b = the
--     value decided; any other state sets write to a function write(key, ttl_ms, a, b, c, d).
-- A body ends at the end of its part and never returns.

-- The error reply for a malformed call: "ERR sluice <script>: [<context>: ]<what is wrong>".
-- script: SCRIPT, the composed script's name. what: the problem, or nil to name the first bad
-- value among now, the four limit values and charge (nil ones are skipped). min_limit: the least
-- limit the script takes (default 0). Runs only on errors.
local function argument_error(script, what, context, now, limit, period, burst, hits,
    min_limit, charge)
  -- Literal limits rather than the constants above: no upvalues, the cheapest closure.
  local function bad(x, name, min, max)
    -- x % 1 is NaN for infinities and NaN, and every comparison with NaN is false.
    if x ~= nil and not (x % 1 == 0 and x >= min and x <= max) then
      return string.format("%s must be an integer in [%.17g, %.17g], got %.17g", name, min, max,
        x)
    end
  end
  local message = what or bad(now, "now", -(2 ^ 52 - 1), 2 ^ 52 - 1) or
    bad(limit, "limit", min_limit or 0, 2 ^ 53 - 1) or bad(period, "period_us", 1, 2 ^ 50) or
    bad(burst, "burst", 0, 2 ^ 53 - 1) or bad(hits, "hits", 0, 2 ^ 53 - 1) or
    bad(charge, "charge", 0, 2)
  if context then
    message = context .. ": " .. tostring(message)
  end
  return redis.error_reply(string.format("ERR sluice %s: %s", script, message or "bad arguments"))
end

-- Stores a request's decided state (admitted, or denied and charged: a body's write, a, b, c, d)
-- with a TTL of `reset` (reset_after_us) rounded up to whole milliseconds, at least 1; when
-- reset is 0 the state decides like a fresh key: write gets ttl_ms 0, a string state is
-- deleted. An unchanged string value keeps its TTL: the deadline it was written with still holds.
local function commit(key, reset, write, a, b, c, d)
  local ttl_ms = 0
  if reset > 0 then
    ttl_ms = math.floor(reset / 1000)
    if ttl_ms * 1000 < reset then
      ttl_ms = ttl_ms + 1
    end
  end
  if write then
    write(key, ttl_ms, a, b, c, d)
  elseif ttl_ms == 0 then
    if a then
      redis.call("DEL", key)
    end
  elseif b ~= a then
    -- "%d": Lua would turn the number into text with "%.14g", several times dearer.
    redis.call("SET", key, b, "PX", string.format("%d", ttl_ms))
  end
end
