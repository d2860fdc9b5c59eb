-- search.lua: the number rules of server/algorithm/algorithm_internal.h that the fractional
-- algorithms share (sliding_window_counter, token_bucket, leaky_bucket, gcra). Needs prelude.lua.

-- 9007199254740992 below is kMaxDurationUs = 2^53 us, the longest duration a decision reports
-- (a literal rather than a shared local: closures that capture nothing are the cheapest).

-- CeilMicros: ceil(x) saturated to [-2^53, 2^53].
local function ceil_micros(x)
  if not (x < 9007199254740992) then
    return 9007199254740992
  end
  if x <= -9007199254740992 then
    return -9007199254740992
  end
  return math.ceil(x)
end

-- FirstAdmittedTime, as a duration: the smallest d in (0, 2^53] such that admits holds at time
-- after + d, or 2^53 if none does. The search runs on offsets from `after`, which stay exact
-- integers where the absolute times after + d could pass 2^53; each predicate is called as
-- admits(d, after, p1, ..., p6) and forms the time it needs from d and after.
-- guess_offset: the analytic estimate minus after (exact wherever it matters: a rounded value
-- above 2^53 is clamped to 2^53 as the exact one would be).
local function first_admitted(guess_offset, admits, after, p1, p2, p3, p4, p5, p6)
  local latest = 9007199254740992
  local hi = guess_offset
  if hi <= 0 then
    hi = 1
  elseif hi > latest then
    hi = latest
  end
  local lo
  local step = 1
  if admits(hi, after, p1, p2, p3, p4, p5, p6) then
    lo = hi - step
    while lo > 0 and admits(lo, after, p1, p2, p3, p4, p5, p6) do
      hi = lo
      step = step * 2
      lo = hi - step
    end
    if lo < 0 then
      lo = 0
    end
  else
    repeat
      if hi == latest then
        return latest
      end
      lo = hi
      hi = lo + step
      if hi > latest then
        hi = latest
      end
      step = step * 2
    until admits(hi, after, p1, p2, p3, p4, p5, p6)
  end
  while hi - lo > 1 do
    local mid = lo + math.floor((hi - lo) / 2)
    if admits(mid, after, p1, p2, p3, p4, p5, p6) then
      hi = mid
    else
      lo = mid
    end
  end
  return hi
end
