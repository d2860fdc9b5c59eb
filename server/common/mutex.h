// The mutex every guarded field in Sluice is guarded by: std::mutex, annotated for Clang's
// thread-safety analysis.
//
// Why not absl::Mutex: Debian's abseil is built without sanitizer hooks, so ThreadSanitizer
// cannot see absl::Mutex's happens-before edges and reports false races; it does see pthread's,
// which std::mutex is. Why not std::mutex itself: libstdc++ does not mark it as a capability, so
// ABSL_GUARDED_BY on a std::mutex is checked by nothing. With this wrapper,
// `scripts/check-thread-safety` (clang -Wthread-safety, run by `scripts/test`) proves that every
// field marked ABSL_GUARDED_BY is touched only under its mutex, and that every function marked
// ABSL_EXCLUSIVE_LOCKS_REQUIRED is called with it held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace sluice {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Takes the mutex only if it is free at once; true if it did.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

  // Tells the analysis that the mutex is held where it cannot see it taken: in a callback that a
  // C library (hiredis, libevent) makes while the caller of that library holds it. No run-time
  // check.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// std::condition_variable over a Mutex. Waits may wake spuriously: wait in a loop on the
// condition, as with any condition variable.
class CondVar {
 public:
  // Releases `mu` while waiting; holds it again on return.
  void Wait(Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, returning by `deadline` at the latest.
  void WaitUntil(Mutex& mu, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait_until(lock, deadline);
    lock.release();
  }
  // As Wait, for at most `timeout_us`.
  void WaitFor(Mutex& mu, int64_t timeout_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    WaitUntil(mu, std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_us));
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace sluice
