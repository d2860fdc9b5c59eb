-- token_bucket.lua: server/algorithm/token_bucket.{h,cc} on Redis. Needs prelude.lua and
-- search.lua.
--
-- State: the key holds struct.pack("<Bdd", 3, tokens, last_us) (3 = the algorithm's code). Any
-- other value, or none, is a fresh key: a full bucket (tokens = burst, last = now).

-- "refill(t) >= threshold" at t = after + d, for first_admitted, where
-- refill(t) = min(B, tokens + (max(0, t - last) * L) / P). (after - last) + d is the exact
-- t - last rounded once, as C++ converts its exact int64 difference.
local function tb_holds(d, after, tokens, last, burst, limit, period, threshold)
  local elapsed = (after - last) + d
  if elapsed < 0 then
    elapsed = 0
  end
  local refilled = tokens + (elapsed * limit) / period
  if not (refilled < burst) then
    refilled = burst
  end
  return refilled >= threshold
end

-- The body, deciding `key` (its contract: prelude.lua).
-- evaluate 3
  local old = redis.pcall("GET", key)
  -- The stored bucket: what refill answers every "when" from.
  local stored_tokens, stored_last = burst, now
  if old and #old == 17 and string.byte(old) == 3 then
    local _
    _, stored_tokens, stored_last = struct.unpack("<Bdd", old)
  end
  local elapsed = now - stored_last
  if elapsed < 0 then
    elapsed = 0
  end
  local tokens = stored_tokens + (elapsed * limit) / period
  if not (tokens < burst) then
    tokens = burst
  end
  local last = stored_last
  if last < now then
    last = now
  end
  if charge == 2 then
    -- GiveBackTokenBucket: back into the refilled bucket, never past full (a fresh key is full).
    tokens = tokens + hits
    if not (tokens < burst) then
      tokens = burst
    end
    hits = 0
  end

  allowed = hits <= burst and tokens >= hits
  local new
  if allowed or charge ~= 0 and (charge == 2 or hits > 0) then
    tokens = tokens - hits
    -- A charge while denied goes into debt, kept down to one period's refill (never binding on
    -- an admission, which leaves tokens >= 0).
    if not allowed and tokens < -limit then
      tokens = -limit
    end
    stored_tokens, stored_last = tokens, last
    new = struct.pack("<Bdd", 3, tokens, last)
  end
  remaining = 0
  if tokens > 0 then
    remaining = math.floor(tokens)
  end
  reset = 0
  if tokens < burst then
    reset = (last - now) + ceil_micros(((burst - tokens) * period) / limit)
    -- The estimate is nearly always first_admitted's answer: the bucket is full at it and not
    -- a microsecond before. Checked here with tb_holds' arithmetic, inline, which spares the
    -- search's three Lua calls; the search runs only when the estimate is not the answer.
    local exact = reset >= 1 and reset <= 9007199254740992
    for d = reset, reset - 1, -1 do
      if not exact or d == 0 then
        break
      end
      local elapsed = (now - stored_last) + d
      if elapsed < 0 then
        elapsed = 0
      end
      local refilled = stored_tokens + (elapsed * limit) / period
      if not (refilled < burst) then
        refilled = burst
      end
      exact = (refilled >= burst) == (d == reset)
    end
    if not exact then
      reset = first_admitted(reset, tb_holds, now, stored_tokens, stored_last, burst, limit,
        period, burst)
    end
  end
  retry = 0
  if not allowed then
    if hits > burst then
      retry = reset
    else
      retry = first_admitted((last - now) + ceil_micros(((hits - tokens) * period) / limit),
        tb_holds, now, stored_tokens, stored_last, burst, limit, period, hits)
    end
  end
  delay, a, b = 0, old, new
