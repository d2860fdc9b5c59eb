#include "client/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace sluice {

int LatencyHistogram::BucketIndex(int64_t value) {
  if (value < (int64_t{1} << kExactBits)) {
    return value < 0 ? 0 : static_cast<int>(value);
  }
  if (value >= (int64_t{1} << kMaxBits)) {
    return kBucketCount - 1;
  }
  // value has `top` + 1 significant bits, top >= kExactBits. Keeping its kExactBits leading bits
  // (a number in [kSubBuckets, 2 * kSubBuckets)) leaves `shift` bits of bucket width.
  const int top = 63 - std::countl_zero(static_cast<uint64_t>(value));
  const int shift = top - (kExactBits - 1);
  return shift * kSubBuckets + static_cast<int>(value >> shift);
}

int64_t LatencyHistogram::BucketLowerBound(int index) {
  if (index < (1 << kExactBits)) {
    return index;
  }
  const int shift = index / kSubBuckets - 1;
  const int64_t mantissa = index - shift * kSubBuckets;
  return mantissa << shift;
}

int64_t LatencyHistogram::BucketWidth(int index) {
  if (index < (1 << kExactBits)) {
    return 1;
  }
  return int64_t{1} << (index / kSubBuckets - 1);
}

void LatencyHistogram::Record(int64_t value, uint64_t count) {
  if (count == 0) {
    return;
  }
  value = std::max<int64_t>(value, 0);
  counts_[BucketIndex(value)] += count;
  if (count_ == 0 || value < min_) {
    min_ = value;
  }
  max_ = std::max(max_, value);
  count_ += count;
  sum_ += static_cast<double>(value) * static_cast<double>(count);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) {
    return;
  }
  for (int i = 0; i < kBucketCount; ++i) {
    counts_[i] += other.counts_[i];
  }
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void LatencyHistogram::Reset() {
  counts_.fill(0);
  count_ = 0;
  min_ = 0;
  max_ = 0;
  sum_ = 0;
}

double LatencyHistogram::Mean() const {
  return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_);
}

int64_t LatencyHistogram::ValueAtQuantile(double q) const {
  if (count_ == 0) {
    return 0;
  }
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const int64_t mid = BucketLowerBound(i) + (BucketWidth(i) - 1) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace sluice
