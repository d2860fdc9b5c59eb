#include "server/service/local_fallback.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sluice {

uint64_t LocalShareOf(uint64_t value, double share) {
  if (value == 0) {
    return 0;
  }
  if (share >= 1) {
    return value;
  }
  const double product = static_cast<double>(value) * share;
  // A decimal share such as 0.1 is not exact in binary, so the product may land a few ulps
  // above a whole number that the user meant exactly; a relative 1e-12 is far above that error
  // and far below any fraction a share written with a few digits can produce.
  const double nearest = std::round(product);
  double rounded = std::abs(product - nearest) <= product * 1e-12 ? nearest : std::ceil(product);
  rounded = std::max(rounded, 1.0);
  return rounded >= static_cast<double>(value) ? value : static_cast<uint64_t>(rounded);
}

LocalFallback::LocalFallback(const Clock& clock, uint32_t replicas_hint,
                             MemoryBackendOptions store_options)
    : clock_(clock),
      replicas_hint_(std::max<uint32_t>(1, replicas_hint)),
      store_options_(store_options) {}

LimitParams LocalFallback::Scale(const LimitParams& params,
                                 std::optional<double> local_share) const {
  LimitParams scaled = params;
  if (local_share.has_value()) {
    scaled.limit = LocalShareOf(params.limit, *local_share);
    scaled.burst = LocalShareOf(params.burst, *local_share);
  } else if (replicas_hint_ > 1) {
    // Integer division, rounded up: exact where 1.0 / replicas_hint would not be.
    scaled.limit = params.limit / replicas_hint_ + (params.limit % replicas_hint_ != 0 ? 1 : 0);
    scaled.burst = params.burst / replicas_hint_ + (params.burst % replicas_hint_ != 0 ? 1 : 0);
  }
  return scaled;
}

MemoryBackend& LocalFallback::Store() {
  if (MemoryBackend* store = store_.load(std::memory_order_acquire)) {
    return *store;
  }
  MutexLock lock(mu_);
  if (owned_store_ == nullptr) {
    owned_store_ = std::make_unique<MemoryBackend>(clock_, store_options_);
    store_.store(owned_store_.get(), std::memory_order_release);
  }
  return *owned_store_;
}

void LocalFallback::Decide(absl::Span<const LimitCheck> checks, absl::Span<Decision> decisions) {
  Store().EvaluateInto(checks, decisions);
}

size_t LocalFallback::KeyCount() const {
  const MemoryBackend* store = store_.load(std::memory_order_acquire);
  return store == nullptr ? 0 : store->KeyCount();
}

size_t LocalFallback::BytesUsed() const {
  const MemoryBackend* store = store_.load(std::memory_order_acquire);
  return store == nullptr ? 0 : store->BytesUsed();
}

void LocalFallback::AppendMetrics(std::string* out) const {
  if (const MemoryBackend* store = store_.load(std::memory_order_acquire)) {
    store->AppendMetrics(out);
  }
}

}  // namespace sluice
