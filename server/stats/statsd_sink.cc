#include "server/stats/statsd_sink.h"

#include <chrono>
#include <utility>

#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/stats/upstream_stats.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<StatsdSink>> StatsdSink::Create(const Metrics& metrics,
                                                               StatsdSinkOptions options) {
  absl::StatusOr<StatsdMogrifiers> mogrifiers = StatsdMogrifiers::Create(options.mogrifiers);
  if (!mogrifiers.ok()) {
    return mogrifiers.status();
  }
  options.encoder.max_payload_bytes = options.protocol == StatsdProtocol::kUdp
                                          ? kStatsdUdpPayloadBytes
                                          : kStatsdTcpPayloadBytes;
  return std::unique_ptr<StatsdSink>(
      new StatsdSink(metrics, std::move(options), std::move(*mogrifiers)));
}

StatsdSink::StatsdSink(const Metrics& metrics, StatsdSinkOptions options,
                       StatsdMogrifiers mogrifiers)
    : metrics_(metrics),
      options_(std::move(options)),
      encoder_(options_.encoder, std::move(mogrifiers)),
      connection_(options_.address, options_.protocol) {}

StatsdSink::~StatsdSink() { Stop(); }

void StatsdSink::Start() {
  thread_ = std::thread([this] { Run(); });
}

void StatsdSink::Run() {
  const int64_t interval_us = absl::ToInt64Microseconds(options_.flush_interval);
  auto next = std::chrono::steady_clock::now() + std::chrono::microseconds(interval_us);
  while (true) {
    {
      MutexLock lock(mu_);
      while (!stopping_ && std::chrono::steady_clock::now() < next) {
        wake_.WaitUntil(mu_, next);
      }
      if (stopping_) {
        return;
      }
    }
    Flush().IgnoreError();
    // Every interval from the start, as a Go ticker ticks, whatever one flush took; a flush
    // that took longer than an interval is followed by the next at once, never by a burst.
    next += std::chrono::microseconds(interval_us);
    const auto now = std::chrono::steady_clock::now();
    if (next < now) {
      next = now;
    }
  }
}

void StatsdSink::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (!thread_.joinable()) {
    return;
  }
  thread_.join();
  bool failing = false;
  {
    MutexLock lock(flush_mu_);
    failing = !last_error_.empty();
  }
  // A statsd that could not be reached is not waited for again (a name that does not resolve
  // can take seconds), so that it cannot hold up the process's exit.
  if (!failing) {
    Flush().IgnoreError();
  }
}

absl::Status StatsdSink::Flush() {
  MutexLock lock(flush_mu_);
  const std::vector<std::string> payloads = encoder_.Encode(UpstreamStatsdSamples(metrics_));
  size_t sent = 0;
  const absl::Status status = connection_.Send(payloads, &sent);
  // Counts that left, even in part, are not sent again (a statsd counts a line it received
  // twice); counts that could not leave at all go with the next flush.
  const bool kept = !status.ok() && sent == 0;
  if (!kept) {
    encoder_.Commit();
  }
  Report(status, kept);
  return status;
}

void StatsdSink::Report(const absl::Status& status, bool kept) {
  const absl::Time now = absl::Now();
  if (status.ok()) {
    if (!last_error_.empty()) {
      SLUICE_LOG(INFO) << "statsd: sending to " << options_.address << " again";
      last_error_.clear();
    }
    return;
  }
  const std::string error(status.message());
  if (error != last_error_ || now - last_error_logged_ >= absl::Minutes(1)) {
    SLUICE_LOG(WARNING) << "statsd: " << error
                        << (kept ? "; the counts go with the next flush"
                                 : "; the rest of this flush's counts are lost");
    last_error_logged_ = now;
  }
  last_error_ = error;
}

}  // namespace sluice
