// A latency histogram for load generators: log-linear buckets in the manner of HdrHistogram,
// fixed memory (about 36 KB), O(1) recording, and mergeable, so each thread records into its own
// and the report merges them.
//
// Values are non-negative integers (sluice-bench records nanoseconds). Values below 256 are
// exact; above, each power of two is split into 128 equal buckets, so a bucket's width is at
// most 1/128 of its lower bound and a reported value (the bucket's midpoint, clamped to the
// exact min and max seen) is within 0.4% of a recorded one. Values from 2^40 (about 18 minutes
// in nanoseconds) up are counted in the last bucket; max() stays exact.
//
// Not thread-safe: one thread records into one histogram; Merge() after the threads are done.
#pragma once

#include <array>
#include <cstdint>

namespace sluice {

class LatencyHistogram {
 public:
  // Values below 2^kExactBits are counted exactly.
  static constexpr int kExactBits = 8;
  // Buckets per power of two above the exact range.
  static constexpr int kSubBuckets = 1 << (kExactBits - 1);
  // Largest value with its own bucket: 2^kMaxBits - 1.
  static constexpr int kMaxBits = 40;
  static constexpr int kBucketCount = (kMaxBits - kExactBits + 2) * kSubBuckets;

  LatencyHistogram() { Reset(); }

  // Counts `value` `count` times. Negative values count as 0.
  void Record(int64_t value, uint64_t count = 1);
  // Adds every count of `other` (the histograms have the same buckets by construction).
  void Merge(const LatencyHistogram& other);
  void Reset();

  uint64_t count() const { return count_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return max_; }
  double Mean() const;
  // The value at quantile `q` in [0, 1]: the smallest recorded value such that at least
  // ceil(q * count()) values are at or below it, to the bucket's precision. 0 when empty.
  int64_t ValueAtQuantile(double q) const;

  // Bucket arithmetic, exposed for tests.
  static int BucketIndex(int64_t value);
  static int64_t BucketLowerBound(int index);
  static int64_t BucketWidth(int index);

 private:
  std::array<uint64_t, kBucketCount> counts_;
  uint64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  // Sum of values, as a double: exact enough for a mean and never overflows.
  double sum_ = 0;
};

}  // namespace sluice
