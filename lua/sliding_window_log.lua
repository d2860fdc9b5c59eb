-- sliding_window_log.lua: server/algorithm/sliding_window_log.{h,cc} on Redis. Needs
-- prelude.lua.
--
-- State: the key holds a sorted set with one member per admission (hits > 0) still kept:
--   score  = cum_before: the hits admitted into this set before this entry,
--   member = struct.pack("<dd", ts_us, cum_after), cum_after = score + hits (16 bytes).
-- Scores grow with every admission and times never decrease (an admission at or before the
-- newest entry's time takes that time, as C++ adds it to the newest entry), so rank order is
-- admission order for both, members are unique even within one microsecond, and the hits of the
-- live entries are cum_after(newest) - score(oldest live): the running total lives in the
-- members, nothing is summed. Each call reads the newest entry and walks only the expired ones
-- at the head (O(expired + log n)); a denial finds the entry whose expiry frees enough room with
-- one ZREVRANGEBYSCORE on the cumulative scores (O(log n)). Expired entries are trimmed only
-- when a request is admitted (or charged), and the set starts again from 0 when nothing in it
-- is live.
-- Any other type at the key (another algorithm's string) is a fresh key, replaced on admission.

local SWL_HEAD = 4 -- entries read from the head at first; later reads double

-- trim: expired entries to drop from the head, or -1 to drop the whole key (nothing live, or
-- another type); score, ts, hits: the entry to add when hits > 0.
local function swl_commit(key, ttl_ms, trim, score, ts, hits)
  if ttl_ms == 0 then
    if trim ~= 0 then
      redis.call("DEL", key)
    end
    return
  end
  if trim < 0 then
    redis.call("DEL", key)
  elseif trim > 0 then
    redis.call("ZREMRANGEBYRANK", key, 0, trim - 1)
  end
  if hits == 0 then
    return -- nothing added: the newest entry, and the TTL set with it, are unchanged
  end
  if score + hits >= 9007199254740992 then -- 2^53
    -- The cumulative count nears 2^53 (a key that never went idle for 2^53 / limit
    -- admissions): shift every entry down by the oldest one's score. O(n), and that rare.
    local entries = redis.call("ZRANGE", key, 0, -1, "WITHSCORES")
    local base = tonumber(entries[2])
    redis.call("DEL", key)
    for i = 1, #entries, 2 do
      local entry_ts, entry_cum = struct.unpack("<dd", entries[i])
      redis.call("ZADD", key, tonumber(entries[i + 1]) - base,
        struct.pack("<dd", entry_ts, entry_cum - base))
    end
    score = score - base
  end
  redis.call("ZADD", key, score, struct.pack("<dd", ts, score + hits))
  -- At least 2 ms: Redis 7.0 reads its millisecond clock twice in PEXPIRE (for the deadline,
  -- then to check it is not already past), so PEXPIRE 1 deletes the key at once whenever the
  -- clock ticks between the two reads (about 1 call in 6000). SET ... PX has no such check.
  if ttl_ms < 2 then
    ttl_ms = 2
  end
  redis.call("PEXPIRE", key, ttl_ms)
end

-- The body, deciding `key` (its contract: prelude.lua).
-- evaluate 1
  local head = redis.pcall("ZRANGE", key, 0, SWL_HEAD - 1, "WITHSCORES")
  local exists = true
  if head.err then
    head = {}
  elseif #head == 0 then
    exists = false
  end
  local n = #head / 2
  local newest_ts, newest_cum
  if n > 0 then
    local member = head[2 * n - 1]
    if n == SWL_HEAD then
      member = redis.call("ZRANGE", key, -1, -1)[1]
    end
    newest_ts, newest_cum = struct.unpack("<dd", member)
  end
  -- An entry (ts, hits) has expired at now iff ts + P <= now; the newest is the last to go.
  local any_live = newest_ts ~= nil and newest_ts + period > now
  local expired, base, total = 0, 0, 0
  if any_live then
    local i, chunk = 1, SWL_HEAD
    while true do
      if i > n then
        chunk = chunk * 2
        head = redis.call("ZRANGE", key, expired, expired + chunk - 1, "WITHSCORES")
        n, i = #head / 2, 1
      end
      if struct.unpack("<d", head[2 * i - 1]) + period > now then
        base = tonumber(head[2 * i])
        break
      end
      expired, i = expired + 1, i + 1
    end
    total = newest_cum - base
  end
  if charge == 2 then
    -- GiveBackSlidingWindowLog: up to `hits` of the live hits go, newest first. The cut falls
    -- at cumulative position newest_cum - hits: entries that start at or after it go whole, the
    -- one that spans it keeps its hits before it (its member rewritten, its score kept).
    if hits >= total then
      if any_live then
        redis.call("DEL", key) -- nothing live is left: a fresh key
        exists, any_live, expired, total = false, false, 0, 0
      end
    elseif hits > 0 then
      local cut = newest_cum - hits
      local cut_text = string.format("%d", cut)
      redis.call("ZREMRANGEBYSCORE", key, cut_text, "+inf")
      local spanning = redis.call("ZREVRANGEBYSCORE", key, "(" .. cut_text, "-inf", "WITHSCORES",
        "LIMIT", 0, 1)
      local cum
      newest_ts, cum = struct.unpack("<dd", spanning[1])
      if cum ~= cut then
        redis.call("ZREM", key, spanning[1])
        redis.call("ZADD", key, spanning[2], struct.pack("<dd", newest_ts, cut))
      end
      newest_cum, total = cut, total - hits
    end
    hits = 0
  end

  allowed = hits <= limit and total <= limit - hits
  local trim, score, entry_ts = expired, 0, now
  if allowed or charge ~= 0 and (charge == 2 or hits > 0) then
    if any_live then
      score = newest_cum
    elseif exists then
      trim = -1
    end
    if hits > 0 then
      if any_live and newest_ts >= now then
        entry_ts = newest_ts
      end
      newest_ts, any_live = entry_ts, true
    end
    total = total + hits
  end
  remaining = 0
  if total < limit then
    remaining = limit - total
  end
  reset = 0
  if any_live then
    reset = newest_ts + period - now
  end
  retry = 0
  if not allowed then
    if hits > limit then
      retry = reset
    else
      -- The entry whose expiry frees `need` hits: the last one with cum_before < base + need.
      -- A denial that was charged adds its entry (cum_before = score) only when committed, after
      -- this: when that entry is the one, its time answers.
      local need = total + hits - limit
      if charge == 1 and hits > 0 and base + need > score then
        retry = entry_ts + period - now
      else
        local entry = redis.call("ZREVRANGEBYSCORE", key, string.format("(%d", base + need),
          "-inf", "LIMIT", 0, 1)
        retry = struct.unpack("<d", entry[1]) + period - now
      end
    end
  end
  delay, write, a, b, c, d = 0, swl_commit, trim, score, entry_ts, hits
