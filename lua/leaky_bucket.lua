-- leaky_bucket.lua: server/algorithm/leaky_bucket.{h,cc} on Redis. Needs prelude.lua and
-- search.lua.
--
-- State: the key holds struct.pack("<Bdd", 4, level, last_us) (4 = the algorithm's code). Any
-- other value, or none, is a fresh key: an empty bucket (level 0, last 0, as LeakyBucketState{}).

-- "drain(t) + cost <= bound" at t = after + d, for first_admitted, where
-- drain(t) = max(0, level - (max(0, t - last) * L) / P) (see tb_holds on the elapsed time).
-- reset asks for an empty bucket: cost 0, bound 0 ("drain(t) <= 0").
local function lb_fits(d, after, level, last, limit, period, cost, bound)
  local elapsed = (after - last) + d
  if elapsed < 0 then
    elapsed = 0
  end
  local drained = level - (elapsed * limit) / period
  if not (0 < drained) then
    drained = 0
  end
  return drained + cost <= bound
end

-- The body, deciding `key` (its contract: prelude.lua).
-- evaluate 4
  local old = redis.pcall("GET", key)
  -- The stored bucket: what drain answers every "when" from.
  local stored_level, stored_last = 0, 0
  if old and #old == 17 and string.byte(old) == 4 then
    local _
    _, stored_level, stored_last = struct.unpack("<Bdd", old)
  end
  local elapsed = now - stored_last
  if elapsed < 0 then
    elapsed = 0
  end
  local level = stored_level - (elapsed * limit) / period
  if not (0 < level) then
    level = 0
  end
  local last = stored_last
  if last < now then
    last = now
  end
  if charge == 2 then
    -- GiveBackLeakyBucket: out of the drained bucket, never below empty.
    level = level - hits
    if not (0 < level) then
      level = 0
    end
    hits = 0
  end

  allowed = hits <= burst and level + hits <= burst
  delay = 0
  local new
  if allowed or charge ~= 0 and (charge == 2 or hits > 0) then
    if allowed and charge ~= 2 then -- a refund holds nothing back
      delay = ceil_micros((level * period) / limit)
    end
    level = level + hits
    -- A charge while denied rises past the capacity, kept up to one period's drain beyond it
    -- (never binding on an admission, which leaves level <= burst).
    if not allowed and level > burst + limit then
      level = burst + limit
    end
    stored_level, stored_last = level, last
    new = struct.pack("<Bdd", 4, level, last)
  end
  remaining = most_that_fits(burst - level, level, 1, burst)
  reset = 0
  if level > 0 then
    reset = (last - now) + ceil_micros((level * period) / limit)
    -- The estimate is nearly always first_admitted's answer: the bucket is empty at it and not
    -- a microsecond before. Checked here with lb_fits' arithmetic, inline, which spares the
    -- search's three Lua calls; the search runs only when the estimate is not the answer (as
    -- in token_bucket.lua).
    local exact = reset >= 1 and reset <= 9007199254740992
    for d = reset, reset - 1, -1 do
      if not exact or d == 0 then
        break
      end
      local elapsed = (now - stored_last) + d
      if elapsed < 0 then
        elapsed = 0
      end
      local drained = stored_level - (elapsed * limit) / period
      if not (0 < drained) then
        drained = 0
      end
      exact = (drained <= 0) == (d == reset)
    end
    if not exact then
      reset = first_admitted(reset, lb_fits, now, stored_level, stored_last, limit, period, 0, 0)
    end
  end
  retry = 0
  if not allowed then
    if hits > burst then
      retry = reset
    else
      retry = first_admitted((last - now) + ceil_micros((((level + hits) - burst) * period) /
        limit), lb_fits, now, stored_level, stored_last, limit, period, hits, burst)
    end
  end
  a, b = old, new
