-- fixed_window.lua: server/algorithm/fixed_window.{h,cc} on Redis. Needs prelude.lua.
--
-- State: the key holds struct.pack("<Bdd", 0, window_start_us, count) (0 = the algorithm's
-- code). Any other value, or none, is a fresh key (count 0).

algorithms[0] = function(key, now, limit, period, burst, hits)
  -- WindowStart: floor(now / P) * P, exactly (fmod is exact).
  local r = math.fmod(now, period)
  if r < 0 then
    r = r + period
  end
  local ws = now - r
  local window_end = ws + period
  local old = redis.pcall("GET", key)
  if type(old) == "table" then
    old = "" -- another type (sliding_window_log's sorted set): not this algorithm's state
  end
  local count = 0
  if old and #old == 17 and string.byte(old) == 0 then
    local _, stored_ws, stored_count = struct.unpack("<Bdd", old)
    if stored_ws == ws then
      count = stored_count
    end
  end

  local allowed = hits <= limit and count <= limit - hits
  local new
  if allowed then
    count = count + hits
    new = struct.pack("<Bdd", 0, ws, count)
  end
  local remaining = 0
  if count < limit then
    remaining = limit - count
  end
  local reset = 0
  if count > 0 then
    reset = window_end - now
  end
  local retry = 0
  if not allowed then
    if hits > limit then
      retry = reset
    else
      retry = window_end - now
    end
  end
  return allowed, remaining, retry, reset, 0, commit_value, old, new
end
