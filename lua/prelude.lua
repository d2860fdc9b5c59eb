-- prelude.lua: the first part of every composed script (see lua/CMakeLists.txt): the registry
-- the algorithm parts fill in, the error reply for malformed calls and the commit of the
-- string-valued states.
--
-- Cost: Redis runs a script's whole body on every call, so every function a part defines is a
-- closure created on every call, dearer with each upvalue it captures. Parts therefore define
-- only what their scripts use, call library functions by their global names (redis.call,
-- struct.pack) rather than capture local copies, and parse nothing they can avoid; the drivers
-- check arguments inline.
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

-- Algorithm code (sluice::Algorithm) -> evaluate(key, now, limit, period, burst, hits), filled in
-- by the algorithm parts. REQUIRES: limit > 0 (the drivers answer limit 0 themselves, as
-- ZeroLimitDecision, without touching the key). evaluate reads the key, decides, and returns
--   allowed (boolean), remaining, retry_after_us, reset_after_us, delay_us, commit, a, b, c, d
-- where commit writes the decided state: commit(key, ttl_ms, a, b, c, d), called only when the
-- request (the whole group) is admitted, with ttl_ms = reset_after_us rounded up to whole
-- milliseconds, at least 1; 0 when reset_after_us is 0: the state decides like a fresh key and
-- is dropped.
local algorithms = {}

-- The error reply for a malformed call: "ERR sluice <script>: [<context>: ]<what is wrong>".
-- script: a script name, or the code of the algorithm a single-key script runs. what: the
-- problem, or nil to name the first bad value among now and the four limit values (nil ones
-- are skipped). Runs only on errors.
local function argument_error(script, what, context, now, limit, period, burst, hits)
  -- Literal limits rather than the constants above: no upvalues, the cheapest closure.
  if type(script) == "number" then
    script = ({[0] = "fixed_window", "sliding_window_log", "sliding_window_counter",
      "token_bucket", "leaky_bucket", "gcra"})[script]
  end
  local function bad(x, name, min, max)
    -- x % 1 is NaN for infinities and NaN, and every comparison with NaN is false.
    if x ~= nil and not (x % 1 == 0 and x >= min and x <= max) then
      return string.format("%s must be an integer in [%.17g, %.17g], got %.17g", name, min, max,
        x)
    end
  end
  local message = what or bad(now, "now", -(2 ^ 52 - 1), 2 ^ 52 - 1) or
    bad(limit, "limit", 0, 2 ^ 53 - 1) or bad(period, "period_us", 1, 2 ^ 50) or
    bad(burst, "burst", 0, 2 ^ 53 - 1) or bad(hits, "hits", 0, 2 ^ 53 - 1)
  if context then
    message = context .. ": " .. tostring(message)
  end
  return redis.error_reply(string.format("ERR sluice %s: %s", script, message or "bad arguments"))
end

-- The commit of every string-valued algorithm: old = the value read (false: none), new = the
-- value decided. An unchanged value keeps its TTL: the deadline it was written with still holds.
local function commit_value(key, ttl_ms, old, new)
  if ttl_ms == 0 then
    if old then
      redis.call("DEL", key)
    end
  elseif new ~= old then
    -- "%d": Lua would turn the number into text with "%.14g", several times dearer.
    redis.call("SET", key, new, "PX", string.format("%d", ttl_ms))
  end
end
