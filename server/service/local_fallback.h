// failure_mode local: decides, in this process, the checks the shared backend (Redis) could not,
// each against this replica's share of its rule's limit. With N replicas behind one Redis and
// each admitting about 1/N of a limit, an outage degrades to approximately the configured limit
// overall, instead of to no limit (allow) or to no traffic (deny).
//
// The state lives in a MemoryBackend under the same storage keys Redis uses, and persists
// across requests (and across outages, until each key's state expires). It is created on first
// use, so a deployment that never falls back pays nothing for it.
//
// Thread-safe: the store is created once under a mutex and read through an atomic pointer
// afterwards; MemoryBackend itself is safe for concurrent use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/types/span.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"
#include "server/backend/memory_backend.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"

namespace sluice {

// ceil(value * share): what one replica may admit of `value`. At least 1 unless `value` is 0
// (a limit of 0 admits nothing anywhere). Products within rounding error of a whole number
// count as that number, so that 30 * 0.1 is 3, not 4.
// REQUIRES: 0 < share <= 1.
uint64_t LocalShareOf(uint64_t value, double share);

class LocalFallback {
 public:
  // `clock` must outlive the fallback; `store_options` size the in-process store.
  // REQUIRES: replicas_hint >= 1.
  LocalFallback(const Clock& clock, uint32_t replicas_hint,
                MemoryBackendOptions store_options = {});

  // `params` as one replica enforces them alone: limit and burst times `local_share` when it is
  // set, else divided by replicas_hint, both rounded up to at least 1 (0 stays 0).
  LimitParams Scale(const LimitParams& params, std::optional<double> local_share) const;

  // Decides `checks` (already scaled with Scale) into `decisions` (one per check),
  // consecutive checks of one group all-or-nothing, as Backend::Evaluate would. Never fails.
  // Allocates nothing beyond what MemoryBackend does, except the store on the first call.
  void Decide(absl::Span<const LimitCheck> checks, absl::Span<Decision> decisions);

  // Keys the store holds; 0 before the first Decide.
  size_t KeyCount() const;
  // Heap bytes the store holds (MemoryBackend::BytesUsed); 0 before the first Decide.
  size_t BytesUsed() const;
  // The store's metrics (MemoryBackend::AppendMetrics, under its options' metric_prefix), once
  // it exists.
  void AppendMetrics(std::string* out) const;

 private:
  MemoryBackend& Store();

  const Clock& clock_;
  const uint32_t replicas_hint_;
  const MemoryBackendOptions store_options_;
  Mutex mu_;
  std::unique_ptr<MemoryBackend> owned_store_ ABSL_GUARDED_BY(mu_);
  // owned_store_.get() once created; read without the mutex on every later call.
  std::atomic<MemoryBackend*> store_{nullptr};
};

}  // namespace sluice
