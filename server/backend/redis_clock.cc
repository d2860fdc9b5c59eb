#include "server/backend/redis_clock.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice {

RedisClock::RedisClock(RedisClockOptions options, const Clock& clock, RedisExecutor& redis)
    : options_(options), clock_(clock), redis_(redis) {
  // Until the first sample: this process's wall clock, as it reads now.
  const int64_t offset = clock_.NowMicros() - clock_.MonotonicMicros();
  WriteSlew(Slew{offset, offset, 0});
}

int64_t RedisClock::OffsetAt(const Slew& slew, int64_t at_us) {
  if (slew.from_us <= slew.to_us) {
    return slew.to_us;
  }
  // Falling at kSlewPerMillion: (at - since) is under 2^63 / 10^4 for 29 years of uptime.
  const int64_t fallen = std::max<int64_t>(0, at_us - slew.since_us) * kSlewPerMillion / 1'000'000;
  return std::max(slew.to_us, slew.from_us - fallen);
}

RedisClock::Slew RedisClock::ReadSlew() const {
  Slew slew;
  uint64_t before = 0;
  do {
    before = slew_sequence_.load(std::memory_order_acquire);
    slew.from_us = slew_from_us_.load(std::memory_order_relaxed);
    slew.to_us = slew_to_us_.load(std::memory_order_relaxed);
    slew.since_us = slew_since_us_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
  } while ((before & 1) != 0 || before != slew_sequence_.load(std::memory_order_relaxed));
  return slew;
}

void RedisClock::WriteSlew(const Slew& slew) {
  const uint64_t sequence = slew_sequence_.load(std::memory_order_relaxed);
  slew_sequence_.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slew_from_us_.store(slew.from_us, std::memory_order_relaxed);
  slew_to_us_.store(slew.to_us, std::memory_order_relaxed);
  slew_since_us_.store(slew.since_us, std::memory_order_relaxed);
  slew_sequence_.store(sequence + 2, std::memory_order_release);
}

int64_t RedisClock::NowMicros() {
  if (options_.use_caller_clock) {
    return clock_.NowMicros();
  }
  const int64_t monotonic = clock_.MonotonicMicros();
  MaybeSampleAt(monotonic);
  return monotonic + OffsetAt(ReadSlew(), monotonic);
}

bool RedisClock::synced() const {
  return options_.use_caller_clock || kept_.load(std::memory_order_acquire) > 0;
}

void RedisClock::MaybeSample() {
  if (options_.use_caller_clock) {
    return;
  }
  MaybeSampleAt(clock_.MonotonicMicros());
}

void RedisClock::MaybeSampleAt(int64_t monotonic) {
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
  redis_.Execute(std::move(batch), monotonic + absl::ToInt64Microseconds(options_.sample_timeout),
                 [this, monotonic, interval](absl::Status status, absl::Span<RedisReply> replies) {
                   OnSample(monotonic, interval, std::move(status), replies);
                 });
}

void RedisClock::OnSample(int64_t sent_us, int64_t interval_us, absl::Status status,
                          absl::Span<RedisReply> replies) {
  const int64_t received = clock_.MonotonicMicros();
  int64_t seconds = 0;
  int64_t micros = 0;
  const bool ok = status.ok() && replies.size() == 1 && replies[0].is_array() &&
                  replies[0].elements().size() == 2 && replies[0].elements()[0].is_string() &&
                  replies[0].elements()[1].is_string() &&
                  absl::SimpleAtoi(replies[0].elements()[0].str(), &seconds) &&
                  absl::SimpleAtoi(replies[0].elements()[1].str(), &micros);
  if (!ok) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    next_sample_us_.store(received + interval_us / 10, std::memory_order_relaxed);
    return;
  }
  const int64_t rtt = received - sent_us;
  const bool first = kept_.load(std::memory_order_acquire) == 0;
  const int64_t kept_rtt = rtt_us_.load(std::memory_order_relaxed);
  const int64_t kept_at = sampled_at_us_.load(std::memory_order_relaxed);
  if (!first && rtt > std::max<int64_t>(1000, 2 * kept_rtt) && received - kept_at < 60'000'000) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int64_t redis_now = seconds * 1'000'000 + micros;
  const int64_t sampled = redis_now - (sent_us + rtt / 2);
  const int64_t in_force = OffsetAt(ReadSlew(), received);
  if (first || sampled >= in_force) {
    // At start, or a step forward: at once.
    WriteSlew(Slew{sampled, sampled, received});
  } else {
    // Behind the decision clock: slewed to, never stepped back to.
    behind_.fetch_add(1, std::memory_order_relaxed);
    WriteSlew(Slew{in_force, sampled, received});
  }
  rtt_us_.store(rtt, std::memory_order_relaxed);
  sampled_at_us_.store(received, std::memory_order_relaxed);
  kept_.fetch_add(1, std::memory_order_release);
}

RedisClockSamples RedisClock::samples() const {
  return RedisClockSamples{kept_.load(std::memory_order_relaxed),
                           skipped_.load(std::memory_order_relaxed),
                           failed_.load(std::memory_order_relaxed),
                           behind_.load(std::memory_order_relaxed)};
}

void RedisClock::AppendMetrics(std::string* out) const {
  if (options_.use_caller_clock) {
    return;
  }
  const RedisClockSamples counts = samples();
  const int64_t monotonic = clock_.MonotonicMicros();
  const Slew slew = ReadSlew();
  const int64_t in_force = OffsetAt(slew, monotonic);
  absl::StrAppend(
      out,
      "# HELP sluice_redis_clock_offset_microseconds Redis' clock minus this process's wall "
      "clock, as decisions use it (--redis_clock=redis)\n"
      "# TYPE sluice_redis_clock_offset_microseconds gauge\n"
      "sluice_redis_clock_offset_microseconds ",
      monotonic + in_force - clock_.NowMicros(),
      "\n# HELP sluice_redis_clock_slew_microseconds How far the decision clock is still ahead "
      "of Redis' last sample, closing at 1% of real time (it never steps back)\n"
      "# TYPE sluice_redis_clock_slew_microseconds gauge\n"
      "sluice_redis_clock_slew_microseconds ",
      in_force - slew.to_us,
      "\n# HELP sluice_redis_clock_round_trip_microseconds Round trip of the clock sample in use "
      "(its error is at most half of it)\n"
      "# TYPE sluice_redis_clock_round_trip_microseconds gauge\n"
      "sluice_redis_clock_round_trip_microseconds ",
      rtt_us_.load(std::memory_order_relaxed),
      "\n# HELP sluice_redis_clock_samples_total Samples of Redis' clock (TIME), by result\n"
      "# TYPE sluice_redis_clock_samples_total counter\n"
      "sluice_redis_clock_samples_total{result=\"kept\"} ", counts.kept,
      "\nsluice_redis_clock_samples_total{result=\"skipped\"} ", counts.skipped,
      "\nsluice_redis_clock_samples_total{result=\"failed\"} ", counts.failed,
      "\n# HELP sluice_redis_clock_samples_behind_total Kept samples that put Redis' clock behind "
      "the decision clock, slewed to rather than stepped back to\n"
      "# TYPE sluice_redis_clock_samples_behind_total counter\n"
      "sluice_redis_clock_samples_behind_total ", counts.behind, "\n");
}

}  // namespace sluice
