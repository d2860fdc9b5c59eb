// A SpanSink that keeps every span it is given, for tests of what is traced. Header-only;
// thread-safe (spans arrive from gRPC and Redis I/O threads).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"
#include "server/trace/span_sink.h"

namespace sluice::testing {

class RecordingSpanSink final : public SpanSink {
 public:
  void Submit(SpanData span) override {
    std::lock_guard<std::mutex> lock(mu_);
    spans_.push_back(std::move(span));
    changed_.notify_all();
  }

  std::vector<SpanData> Spans() const {
    std::lock_guard<std::mutex> lock(mu_);
    return spans_;
  }
  // The spans named `name`, in the order they ended.
  std::vector<SpanData> Named(const std::string& name) const {
    std::vector<SpanData> out;
    for (SpanData& span : Spans()) {
      if (span.name == name) {
        out.push_back(std::move(span));
      }
    }
    return out;
  }
  // Waits until at least `n` spans have ended, up to `timeout`; true if they have.
  bool WaitFor(size_t n, absl::Duration timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, absl::ToChronoMicroseconds(timeout),
                             [&] { return spans_.size() >= n; });
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    spans_.clear();
  }

 private:
  // std::mutex rather than absl's: Debian's abseil is not built for TSan (notification.h).
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<SpanData> spans_;
};

// The value of a span's string or integer attribute, for assertions: "" or 0 when absent.
inline std::string StringAttribute(const SpanData& span, absl::string_view key) {
  const SpanAttribute* attribute = span.Find(key);
  if (attribute == nullptr || !std::holds_alternative<std::string>(attribute->value)) {
    return "";
  }
  return std::get<std::string>(attribute->value);
}
inline int64_t IntAttribute(const SpanData& span, absl::string_view key) {
  const SpanAttribute* attribute = span.Find(key);
  if (attribute == nullptr || !std::holds_alternative<int64_t>(attribute->value)) {
    return 0;
  }
  return std::get<int64_t>(attribute->value);
}

}  // namespace sluice::testing
