// The clock Redis-backed decisions are made on. By default Redis' own, so that every replica
// decides on one clock: this process's monotonic clock plus an offset sampled with TIME every
// `sync_interval`, taken from whichever decision first finds a sample due (no thread of its
// own). Redis read its clock somewhere within the sample's round trip, so the offset assumes
// the middle and its error is at most half the round trip. A sample must finish within
// `sample_timeout`; one whose round trip is more than twice the kept one's (a slow moment) is
// skipped unless the kept one is a minute old; a failed one is retried after a tenth of the
// interval. Until the first sample the offset is this process's wall clock's, as at
// construction. With `use_caller_clock`, this process's wall clock as it is (replicas must
// agree, NTP) and no sampling at all.
//
// The decision clock never steps back. It runs on the monotonic clock, so a step of this
// host's wall clock (NTP) does not move it. A sample that puts Redis ahead of it is applied at
// once (a step forward); one that puts Redis behind it (sampling error, a clock that drifts
// slower, a failover to a host whose clock is behind) is slewed: the offset falls by
// kSlewPerMillion of the time that passes, so that the decision clock runs at 99% of real time
// until it meets Redis' again, then at 100%. The first sample is applied whichever way it goes
// (start-up waits for it).
//
// Thread-safe: any thread may read the time; samples complete on the Redis client's threads,
// one at a time. The executor must outlive the clock, and be stopped (so that no sample's
// callback is pending) before the clock is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/common/clock.h"
#include "server/redis/redis_executor.h"

namespace sluice {

struct RedisClockOptions {
  bool use_caller_clock = false;
  absl::Duration sync_interval = absl::Seconds(1);
  absl::Duration sample_timeout = absl::Milliseconds(10);
};

// Samples of Redis' clock so far, for tests and metrics.
struct RedisClockSamples {
  uint64_t kept = 0;     // the offset in use comes from the latest of these
  uint64_t skipped = 0;  // round trip over twice the kept sample's
  uint64_t failed = 0;   // no answer within the timeout, or not a TIME reply
  uint64_t behind = 0;   // of the kept: Redis behind the decision clock, slewed to
};

class RedisClock {
 public:
  // How fast the offset falls toward a sample behind it: 1% of the time that passes.
  static constexpr int64_t kSlewPerMillion = 10'000;

  // `clock` and `redis` must outlive this object.
  RedisClock(RedisClockOptions options, const Clock& clock, RedisExecutor& redis);

  RedisClock(const RedisClock&) = delete;
  RedisClock& operator=(const RedisClock&) = delete;

  // Microseconds since the Unix epoch on the decision clock; sends a sample if one is due.
  int64_t NowMicros();

  // Whether the offset in use comes from a sample (always true with the caller's clock).
  bool synced() const;
  // Sends a sample now if one is due; for start-up, which waits for the first.
  void MaybeSample();

  RedisClockSamples samples() const;
  // The offset in use (Redis' clock minus this process's wall clock, as decisions see it), how
  // much of a sample behind is still being slewed, the kept sample's round trip, and the
  // samples by result (nothing with the caller's clock).
  void AppendMetrics(std::string* out) const;

 private:
  // The offset (Redis' time minus this process's monotonic clock) at monotonic time `at_us`:
  // `from_us`, falling at kSlewPerMillion since `since_us` down to `to_us`, no further.
  struct Slew {
    int64_t from_us;
    int64_t to_us;
    int64_t since_us;
  };
  static int64_t OffsetAt(const Slew& slew, int64_t at_us);
  Slew ReadSlew() const;
  // The only writer: the kept sample's callback (one at a time), or the constructor.
  void WriteSlew(const Slew& slew);
  // Sends a sample if one is due, `monotonic` being now.
  void MaybeSampleAt(int64_t monotonic);
  void OnSample(int64_t sent_us, int64_t interval_us, absl::Status status,
                absl::Span<RedisReply> replies);

  const RedisClockOptions options_;
  const Clock& clock_;
  RedisExecutor& redis_;
  // The slew in force, behind a sequence lock: odd while the one writer writes it.
  std::atomic<uint64_t> slew_sequence_{0};
  std::atomic<int64_t> slew_from_us_{0};
  std::atomic<int64_t> slew_to_us_{0};
  std::atomic<int64_t> slew_since_us_{0};
  // When (monotonic) the next sample is due.
  std::atomic<int64_t> next_sample_us_{0};
  // The kept sample's round trip, and when (monotonic) it was taken. Written by one sample's
  // callback at a time (whoever moves next_sample_us_ sends it, and it ends within its timeout,
  // long before the next is due).
  std::atomic<int64_t> rtt_us_{0};
  std::atomic<int64_t> sampled_at_us_{0};
  // Incremented (release) after the offset is stored: non-zero means the offset is Redis'.
  std::atomic<uint64_t> kept_{0};
  std::atomic<uint64_t> skipped_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> behind_{0};
};

}  // namespace sluice
