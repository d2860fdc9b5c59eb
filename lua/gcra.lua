-- gcra.lua: server/algorithm/gcra.{h,cc} on Redis. Needs prelude.lua and search.lua.
--
-- State: the key holds struct.pack("<Bd", 5, tat_us) (5 = the algorithm's code; the theoretical
-- arrival time). Any other value, or none, is a fresh key (tat 0, as GcraState{}).

-- "Ahead(tat, t) + cost <= tolerance" with Ahead(tat, t) = max(tat, t) - t and t the double
-- nearest after + d (C++ converts its exact int64 t the same way), for first_admitted.
local function gcra_admits(d, after, tat, cost, tolerance)
  local t = after + d
  local ahead = 0
  if not (tat < t) then
    ahead = tat - t
  end
  return ahead + cost <= tolerance
end

-- The body, deciding `key` (its contract: prelude.lua).
-- evaluate 5
  local interval = period / limit
  local tolerance = interval * burst
  local cost = hits * interval

  local old = redis.pcall("GET", key)
  local tat = 0
  if old and #old == 9 and string.byte(old) == 5 then
    local _
    _, tat = struct.unpack("<Bd", old)
  end
  local ahead = 0
  if not (tat < now) then
    ahead = tat - now
  end
  if charge == 2 then
    -- GiveBackGcra: the TAT moves back by the hits' intervals, never before now.
    if tat < now then
      tat = now
    end
    tat = tat - hits * interval
    if tat < now then
      tat = now
    end
    hits, cost, ahead = 0, 0, tat - now
  end
  allowed = hits <= burst and ahead + cost <= tolerance
  local ahead_after = ahead
  local new
  if allowed or charge ~= 0 and (charge == 2 or hits > 0) then
    if tat < now then
      tat = now
    end
    tat = tat + cost
    -- A charge while denied moves the TAT past the tolerance, kept within one period beyond it
    -- (never binding on an admission, which leaves the TAT within the tolerance; a refund, here
    -- with hits 0, leaves a TAT that a clock stepping back sees further ahead as it was).
    if not allowed and charge == 1 and tat > now + (tolerance + period) then
      tat = now + (tolerance + period)
    end
    new = struct.pack("<Bd", 5, tat)
    ahead_after = 0
    if not (tat < now) then
      ahead_after = tat - now
    end
  end

  remaining = most_that_fits((tolerance - ahead_after) / interval, ahead_after, interval,
    tolerance)
  reset = ceil_micros(ahead_after)
  retry = 0
  if not allowed then
    if hits > burst then
      retry = reset
    else
      retry = first_admitted(ceil_micros((ahead_after + cost) - tolerance), gcra_admits, now, tat,
        cost, tolerance)
    end
  end
  delay, a, b = 0, old, new
