-- sliding_window_counter.lua: server/algorithm/sliding_window_counter.{h,cc} on Redis. Needs
-- prelude.lua and search.lua.
--
-- State: the key holds struct.pack("<Bddd", 2, window_start_us, current, previous) (2 = the
-- algorithm's code). Any other value, or none, is a fresh key (window 0, both counters 0).

-- WindowStart: floor(now / P) * P, exactly (fmod is exact).
local function window_start(now, period)
  local r = math.fmod(now, period)
  if r < 0 then
    r = r + period
  end
  return now - r
end

-- AdmitsAt(t = after + d) on the stored state, for first_admitted: roll the counters to t's
-- window, then previous * (P - elapsed) / P + current + hits <= L.
local function swc_admits(d, after, stored_ws, stored_current, stored_previous, period, limit,
                          hits)
  local t = after + d
  local ws = window_start(t, period)
  local current, previous = 0, 0
  if stored_ws == ws then
    current, previous = stored_current, stored_previous
  elseif stored_ws == ws - period then
    previous = stored_current
  end
  local estimate = (previous * (period - (t - ws))) / period + current
  return hits <= limit and estimate + hits <= limit
end

-- The body, deciding `key` (its contract: prelude.lua).
-- evaluate 2
  local ws = window_start(now, period)
  local old = redis.pcall("GET", key)
  local stored_ws, stored_current, stored_previous = 0, 0, 0
  if old and #old == 25 and string.byte(old) == 2 then
    local _
    _, stored_ws, stored_current, stored_previous = struct.unpack("<Bddd", old)
  end
  -- RollTo: the counters as seen from the window starting at ws.
  local current, previous = 0, 0
  if stored_ws == ws then
    current, previous = stored_current, stored_previous
  elseif stored_ws == ws - period then
    previous = stored_current
  end
  if charge == 2 then
    -- GiveBackSlidingWindowCounter: the current window's count, never below 0.
    if hits < current then
      current = current - hits
    else
      current = 0
    end
    hits = 0
  end
  local weighted = (previous * (period - (now - ws))) / period
  local estimate = weighted + current

  allowed = hits <= limit and estimate + hits <= limit
  local new
  if allowed or charge ~= 0 and (charge == 2 or hits > 0) then
    current = current + hits
    -- What the retry search below starts from: the state as written.
    stored_ws, stored_current, stored_previous = ws, current, previous
    new = struct.pack("<Bddd", 2, ws, current, previous)
  end
  local estimate_after = weighted + current
  remaining = most_that_fits(limit - estimate_after, estimate_after, 1, limit)
  reset = 0
  if current > 0 then
    reset = ws + 2 * period - now
  elseif previous > 0 then
    reset = ws + period - now
  end
  retry = 0
  if not allowed then
    if hits > limit then
      retry = reset
    else
      -- EstimateRetryTime: the analytic first admitted time, in this window if the previous
      -- one's weight can fall far enough, else in the next one (previous' = current).
      local p = period
      local guess
      local room_now = limit - (current + hits)
      if previous > 0 and room_now >= 0 then
        local elapsed = ceil_micros(p - (room_now * p) / previous)
        if elapsed < period then
          guess = ws + elapsed
        end
      end
      if not guess then
        local room_next = limit - hits
        guess = ws + period
        if current > room_next then
          guess = guess + ceil_micros(p - (room_next * p) / current)
        end
      end
      retry = first_admitted(guess - now, swc_admits, now, stored_ws, stored_current,
        stored_previous, period, limit, hits)
    end
  end
  delay, a, b = 0, old, new
