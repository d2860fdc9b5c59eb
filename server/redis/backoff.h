// Reconnect delays for a Redis connection: exponential from a minimum to a maximum, each delay
// drawn at random from the upper half of its step ("equal jitter"), so that many replicas that
// lost the same Redis at the same moment do not reconnect in lockstep, yet none retries sooner
// than half the step. Randomness comes from an injected generator so tests can pin it.
//
// Not thread-safe: each connection owns one and uses it on its loop thread. The generator it is
// given may be shared and must then be safe to call concurrently.
#pragma once

#include <cstdint>
#include <functional>

namespace sluice {

// Returns uniformly distributed 64-bit values.
using RandomFn = std::function<uint64_t()>;

// A RandomFn safe to call from any thread: one std::mt19937_64 per thread, seeded from
// std::random_device.
RandomFn DefaultRandom();

class ExponentialBackoff {
 public:
  // REQUIRES: 0 < min_us <= max_us; `random` is callable.
  ExponentialBackoff(int64_t min_us, int64_t max_us, RandomFn random);

  // The delay before the next attempt: with step = min(max, min * 2^attempts), a value in
  // [step / 2, step]. Each call counts one more attempt.
  int64_t NextDelayMicros();

  // Back to the first step, after a success.
  void Reset() { attempts_ = 0; }

  int attempts() const { return attempts_; }

 private:
  const int64_t min_us_;
  const int64_t max_us_;
  RandomFn random_;
  int attempts_ = 0;
};

}  // namespace sluice
