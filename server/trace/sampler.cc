#include "server/trace/sampler.h"

#include <cstddef>
#include <cstdint>

namespace sluice {

bool SampledByRatio(const TraceId& trace_id, double ratio) {
  // Written so that NaN, which fails every comparison, is never sampled.
  if (!(ratio > 0.0)) {
    return false;
  }
  if (ratio >= 1.0) {
    return true;
  }
  // 2^63 exactly; ratio < 1 keeps the product below it, so the conversion is defined.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  const uint64_t bound = static_cast<uint64_t>(ratio * kTwoTo63);
  uint64_t low = 0;
  for (size_t i = 8; i < trace_id.size(); ++i) {
    low = (low << 8) | trace_id[i];
  }
  return (low >> 1) < bound;
}

bool ShouldSample(const std::optional<TraceContext>& parent, const TraceId& trace_id,
                  double ratio) {
  if (parent.has_value() && !parent->sampling_deferred) {
    return parent->sampled;
  }
  return SampledByRatio(trace_id, ratio);
}

}  // namespace sluice
