// envoyproxy/ratelimit's statsd and DogStatsD sinks (its USE_STATSD, the default under its
// variables, and USE_DOG_STATSD), as --statsd_address: every flush interval (STATS_FLUSH_INTERVAL,
// default 10 s), a thread of its own reads Sluice's counters under upstream's statsd names
// (UpstreamStatsdSamples, the names --prometheus_address maps), encodes what changed since the
// last flush (statsd_encoder.h) and sends it (statsd_connection.h). The request path is not
// touched: it keeps counting into Metrics as it does; only this thread reads, at flush time.
//
// A flush whose payloads could not leave at all (the name does not resolve, a TCP connection is
// refused) is not remembered as sent: the next flush sends those increases with its own, so a
// statsd that comes up late receives every count. Counts sent into a dead UDP port are lost, as
// with any statsd client. Stopping flushes one last time, so the counts of the drain are sent,
// unless the last flush failed (then the exit does not wait for that statsd again).
//
// Failures are logged when they start and when they change (at most one line a minute while
// they repeat), and when sending works again.
//
// Thread-safe: Start, Stop and Flush may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/mutex.h"
#include "server/service/metrics.h"
#include "server/stats/statsd_connection.h"
#include "server/stats/statsd_encoder.h"
#include "server/stats/statsd_mogrifier.h"

namespace sluice {

struct StatsdSinkOptions {
  // HOST:PORT (ValidateHostPort).
  std::string address;
  StatsdProtocol protocol = StatsdProtocol::kUdp;
  absl::Duration flush_interval = absl::Seconds(10);
  // DogStatsD, extra tags, global tags; max_payload_bytes is set from `protocol`.
  StatsdEncoderOptions encoder;
  // DogStatsD only.
  std::vector<StatsdMogrifierRule> mogrifiers;
};

class StatsdSink {
 public:
  // kInvalidArgument for mogrifiers that cannot be compiled (naming the rule). Sends nothing
  // until Start. `metrics` must outlive the sink.
  static absl::StatusOr<std::unique_ptr<StatsdSink>> Create(const Metrics& metrics,
                                                            StatsdSinkOptions options);
  // Stop.
  ~StatsdSink();
  StatsdSink(const StatsdSink&) = delete;
  StatsdSink& operator=(const StatsdSink&) = delete;

  // Starts the flush thread. REQUIRES: once.
  void Start();
  // Stops the thread, then flushes one last time unless the last flush failed. Idempotent.
  void Stop();
  // One flush now, on the caller's thread; the status of its send (OK when nothing changed).
  absl::Status Flush();

 private:
  StatsdSink(const Metrics& metrics, StatsdSinkOptions options, StatsdMogrifiers mogrifiers);
  void Run();
  // Logs a failure (`kept`: nothing left, the counts go with the next flush) or a recovery.
  void Report(const absl::Status& status, bool kept) ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_);

  const Metrics& metrics_;
  const StatsdSinkOptions options_;
  // One flush at a time (the thread's, Stop's last one, a test's).
  Mutex flush_mu_;
  StatsdEncoder encoder_ ABSL_GUARDED_BY(flush_mu_);
  StatsdConnection connection_ ABSL_GUARDED_BY(flush_mu_);
  std::string last_error_ ABSL_GUARDED_BY(flush_mu_);
  absl::Time last_error_logged_ ABSL_GUARDED_BY(flush_mu_) = absl::InfinitePast();

  Mutex mu_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sluice
