#include "server/backend/redis_clock.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice {

RedisClock::RedisClock(RedisClockOptions options, const Clock& clock, RedisExecutor& redis)
    : options_(options), clock_(clock), redis_(redis) {}

int64_t RedisClock::NowMicros() {
  if (options_.use_caller_clock) {
    return clock_.NowMicros();
  }
  MaybeSample();
  return clock_.NowMicros() + offset_us_.load(std::memory_order_relaxed);
}

bool RedisClock::synced() const {
  return options_.use_caller_clock || kept_.load(std::memory_order_acquire) > 0;
}

void RedisClock::MaybeSample() {
  if (options_.use_caller_clock) {
    return;
  }
  const int64_t monotonic = clock_.MonotonicMicros();
  int64_t due = next_sample_us_.load(std::memory_order_relaxed);
  if (monotonic < due) {
    return;
  }
  // One sampler at a time: whoever moves the due time forward sends the TIME.
  const int64_t interval = absl::ToInt64Microseconds(options_.sync_interval);
  if (!next_sample_us_.compare_exchange_strong(due, monotonic + interval,
                                               std::memory_order_relaxed)) {
    return;
  }
  CommandBatch batch;
  batch.Add({"TIME"});
  const int64_t sent = clock_.NowMicros();
  redis_.Execute(
      std::move(batch), monotonic + absl::ToInt64Microseconds(options_.sample_timeout),
      [this, sent, interval](absl::Status status, absl::Span<RedisReply> replies) {
        const int64_t received = clock_.NowMicros();
        int64_t seconds = 0;
        int64_t micros = 0;
        const bool ok = status.ok() && replies.size() == 1 && replies[0].is_array() &&
                        replies[0].elements().size() == 2 &&
                        replies[0].elements()[0].is_string() &&
                        replies[0].elements()[1].is_string() &&
                        absl::SimpleAtoi(replies[0].elements()[0].str(), &seconds) &&
                        absl::SimpleAtoi(replies[0].elements()[1].str(), &micros);
        if (!ok) {
          failed_.fetch_add(1, std::memory_order_relaxed);
          next_sample_us_.store(clock_.MonotonicMicros() + interval / 10,
                                std::memory_order_relaxed);
          return;
        }
        const int64_t rtt = received - sent;
        const int64_t monotonic_now = clock_.MonotonicMicros();
        const bool first = kept_.load(std::memory_order_acquire) == 0;
        const int64_t kept_rtt = rtt_us_.load(std::memory_order_relaxed);
        const int64_t kept_at = sampled_at_us_.load(std::memory_order_relaxed);
        if (!first && rtt > std::max<int64_t>(1000, 2 * kept_rtt) &&
            monotonic_now - kept_at < 60'000'000) {
          skipped_.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        const int64_t redis_now = seconds * 1'000'000 + micros;
        offset_us_.store(redis_now - (sent + rtt / 2), std::memory_order_relaxed);
        rtt_us_.store(rtt, std::memory_order_relaxed);
        sampled_at_us_.store(monotonic_now, std::memory_order_relaxed);
        kept_.fetch_add(1, std::memory_order_release);
      });
}

RedisClockSamples RedisClock::samples() const {
  return RedisClockSamples{kept_.load(std::memory_order_relaxed),
                           skipped_.load(std::memory_order_relaxed),
                           failed_.load(std::memory_order_relaxed)};
}

void RedisClock::AppendMetrics(std::string* out) const {
  if (options_.use_caller_clock) {
    return;
  }
  const RedisClockSamples counts = samples();
  absl::StrAppend(
      out,
      "# HELP sluice_redis_clock_offset_microseconds Redis' clock minus this process's, as "
      "decisions use it (--redis_clock=redis)\n"
      "# TYPE sluice_redis_clock_offset_microseconds gauge\n"
      "sluice_redis_clock_offset_microseconds ",
      offset_us_.load(std::memory_order_relaxed),
      "\n# HELP sluice_redis_clock_round_trip_microseconds Round trip of the clock sample in use "
      "(its error is at most half of it)\n"
      "# TYPE sluice_redis_clock_round_trip_microseconds gauge\n"
      "sluice_redis_clock_round_trip_microseconds ",
      rtt_us_.load(std::memory_order_relaxed),
      "\n# HELP sluice_redis_clock_samples_total Samples of Redis' clock (TIME), by result\n"
      "# TYPE sluice_redis_clock_samples_total counter\n"
      "sluice_redis_clock_samples_total{result=\"kept\"} ", counts.kept,
      "\nsluice_redis_clock_samples_total{result=\"skipped\"} ", counts.skipped,
      "\nsluice_redis_clock_samples_total{result=\"failed\"} ", counts.failed, "\n");
}

}  // namespace sluice
