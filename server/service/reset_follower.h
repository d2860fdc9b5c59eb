// Keeps this replica's over-limit cache true to resets made through other replicas: reads the
// store's reset log (Backend::ReadResets) every `interval` on a thread of its own and forgets
// the cache entries of the storage keys it names; when the log says some resets may be missing
// (it was trimmed past this replica's place, or lost, ResetLogPage::lost), it forgets the whole
// cache, which costs only backend calls. A read that fails is retried at the next interval from
// the same place. The first read takes a place at the log's end; resets before it are not this
// replica's concern (its cache is empty when it starts), unless reads failed before it: then
// the cache may hold denials older than resets it will never read, and it is forgotten whole.
//
// Thread-safe: Start and Stop from one thread; PollOnce from any one thread at a time (the
// follower's own while started); the metrics from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/backend/backend.h"
#include "server/common/mutex.h"
#include "server/service/over_limit_cache.h"

namespace sluice {

struct ResetFollowerOptions {
  // Between two reads of the log: how long another replica's reset may take to reach this
  // replica's cache, less a round trip.
  absl::Duration interval = absl::Seconds(1);
  // The longest one read is waited for (the store's own budget ends it sooner).
  absl::Duration read_timeout = absl::Seconds(5);
};

class ResetFollower {
 public:
  // `backend` (whose SharesResets() is true) and `cache` must outlive the follower.
  ResetFollower(Backend& backend, OverLimitCache& cache, ResetFollowerOptions options = {});
  // Stops the thread.
  ~ResetFollower();
  ResetFollower(const ResetFollower&) = delete;
  ResetFollower& operator=(const ResetFollower&) = delete;

  // Starts the thread: a first read at once, then one every interval. REQUIRES: not started.
  void Start();
  // Stops the thread, waiting for a read in flight (at most read_timeout). Idempotent.
  void Stop();

  // One read of the log and what it says done, waited for; the error of a failed read.
  absl::Status PollOnce();

  // sluice_reset_log_reads_total{result}, sluice_reset_log_keys_forgotten_total and
  // sluice_reset_log_cache_clears_total.
  void AppendMetrics(std::string* out) const;

 private:
  void Run();

  Backend& backend_;
  OverLimitCache& cache_;
  const ResetFollowerOptions options_;
  // The place in the log: only PollOnce's caller touches it.
  std::string cursor_;
  Mutex mu_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::atomic<uint64_t> reads_ok_{0};
  std::atomic<uint64_t> reads_failed_{0};
  std::atomic<uint64_t> forgotten_{0};
  std::atomic<uint64_t> clears_{0};
};

}  // namespace sluice
