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
-- problem, or nil to name the first bad argument among now (ARGV[1]) and the four limit
-- arguments from ARGV[first] on. Runs only on errors.
local function argument_error(script, what, first, context)
  -- Literal limits rather than the constants above: no upvalues, the cheapest closure.
  if type(script) == "number" then
    script = ({[0] = "fixed_window", "sliding_window_log", "sliding_window_counter",
      "token_bucket", "leaky_bucket", "gcra"})[script]
  end
  local function bad(i, name, min, max)
    local x = tonumber(ARGV[i])
    if x == nil or x % 1 ~= 0 or x < min or x > max then
      return string.format("%s (ARGV[%d]) must be an integer in [%.17g, %.17g], got '%s'", name,
        i, min, max, tostring(ARGV[i]))
    end
  end
  local message = what
  if not message and ARGV[1] ~= "" then
    message = bad(1, "now", -(2 ^ 52 - 1), 2 ^ 52 - 1)
  end
  if not message and first then
    message = bad(first, "limit", 0, 2 ^ 53 - 1) or bad(first + 1, "period_us", 1, 2 ^ 50) or
      bad(first + 2, "burst", 0, 2 ^ 53 - 1) or bad(first + 3, "hits", 0, 2 ^ 53 - 1)
  end
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
    redis.call("SET", key, new, "PX", ttl_ms)
  end
end
