-- fits.lua: MostThatFits of server/algorithm/algorithm_internal.h, for the algorithms that count
-- what still fits (sliding_window_counter, leaky_bucket, gcra; the token bucket floors its
-- tokens instead). Its own part so that a script that does not use it does not pay for the
-- closure on every call.

-- MostThatFits for the one predicate all its callers use, "base + n * step <= bound" (step 1
-- for the counters and the leaky bucket, whose C++ adds n itself: n * 1 is n): the largest
-- n >= 0 for which it holds, from FloorRemaining(guess) = max(0, floor(guess)).
local function most_that_fits(guess, base, step, bound)
  local n = 0
  if guess > 0 then
    n = math.floor(guess)
  end
  while base + (n + 1) * step <= bound do
    n = n + 1
  end
  while n > 0 and not (base + n * step <= bound) do
    n = n - 1
  end
  return n
end
