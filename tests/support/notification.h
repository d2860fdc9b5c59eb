// absl::Notification's interface on std::mutex, for tests. Debian's abseil is built without
// sanitizer hooks, so ThreadSanitizer cannot see absl's happens-before edges, while it does see
// pthread's. Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace sluice::testing {

class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMicroseconds(timeout), [this] { return notified_; });
  }
  void WaitForNotification() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace sluice::testing
