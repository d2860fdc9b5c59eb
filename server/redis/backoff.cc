#include "server/redis/backoff.h"

#include <random>
#include <utility>

namespace sluice {

RandomFn DefaultRandom() {
  return [] {
    thread_local std::mt19937_64 engine{std::random_device{}()};
    return static_cast<uint64_t>(engine());
  };
}

ExponentialBackoff::ExponentialBackoff(int64_t min_us, int64_t max_us, RandomFn random)
    : min_us_(min_us), max_us_(max_us), random_(std::move(random)) {}

int64_t ExponentialBackoff::NextDelayMicros() {
  int64_t step = min_us_;
  // Doubling stops at max, so this cannot overflow however many attempts have failed.
  for (int i = 0; i < attempts_ && step < max_us_; ++i) {
    step *= 2;
  }
  if (step > max_us_) {
    step = max_us_;
  }
  ++attempts_;
  int64_t half = step / 2;
  int64_t span = step - half + 1;  // [half, step], inclusive
  return half + static_cast<int64_t>(random_() % static_cast<uint64_t>(span));
}

}  // namespace sluice
