-- fixed_window.lua: server/algorithm/fixed_window.{h,cc} on Redis, for the group script (a lone
-- fixed window runs as plain INCRBY + PEXPIRE NX: server/backend/script_codec.h). Needs
-- prelude.lua.
--
-- State: one key per window (the caller names the window in the key, FixedWindowKey), holding
-- the window's count as a decimal integer, the form INCRBY reads and writes. No value, or one
-- that is not a number, is a fresh window (count 0); a negative count (a lone request's hits
-- returned after its window's key expired) counts as 0.

-- The body, deciding `key` (its contract: prelude.lua). A window has no burst: the caller sends
-- the time from now to the end of the window that holds now in its place (AppendGroupScriptCheck:
-- where a window ends is FixedWindowAt's, calendar months included), so `period` is not read.
-- evaluate 0
  local window_end = now + burst
  local old = redis.pcall("GET", key)
  local count = 0
  if old then
    count = tonumber(old) or 0
    if not (count > 0) then
      count = 0
    end
  end
  if charge == 2 then
    -- GiveBackFixedWindow: this window's count, never below 0.
    if hits < count then
      count = count - hits
    else
      count = 0
    end
    hits = 0
  end

  allowed = hits <= limit and count <= limit - hits
  local new
  if allowed or charge ~= 0 and (charge == 2 or hits > 0) then
    count = count + hits
    new = string.format("%.0f", count)
  end
  remaining = 0
  if count < limit then
    remaining = limit - count
  end
  reset = 0
  if count > 0 then
    reset = window_end - now
  end
  retry = 0
  if not allowed then
    if hits > limit then
      retry = reset
    else
      retry = window_end - now
    end
  end
  delay, a, b = 0, old, new
