// Publishes immutable snapshots (the cluster client's slot map and node clients) to readers on
// any thread, with no lock and no shared write on the read path: each thread keeps the last
// snapshot it read together with the publisher's generation at that time; a read is one atomic
// load of the generation and, if nothing was published since, a copy of the thread's own
// shared_ptr. Only a thread's first read after a publication takes the mutex to fetch the new
// snapshot. Writers (rare: topology refreshes, MOVED patches) take the mutex.
//
// Why not std::atomic<std::shared_ptr<T>>: libstdc++ 12's implementation releases its internal
// lock bit with a relaxed store in load(), so a load and a later store race under the C++ memory
// model, and ThreadSanitizer reports it.
//
// Cost model: each thread caches one snapshot of one publisher per T. A thread that alternates
// between publishers of the same T takes the mutex on each switch; a thread keeps its last
// snapshot alive until it reads again or exits.
//
// Thread-safety: every method is safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "server/common/mutex.h"

namespace sluice {

template <typename T>
class SnapshotPublisher {
 public:
  SnapshotPublisher() : id_(NextId()) {}
  SnapshotPublisher(const SnapshotPublisher&) = delete;
  SnapshotPublisher& operator=(const SnapshotPublisher&) = delete;

  // The latest snapshot (nullptr before the first Store).
  std::shared_ptr<const T> Load() const {
    struct Cache {
      uint64_t publisher = 0;
      uint64_t generation = 0;
      std::shared_ptr<const T> value;
    };
    thread_local Cache cache;
    uint64_t generation = generation_.load(std::memory_order_acquire);
    if (cache.publisher == id_ && cache.generation == generation) {
      return cache.value;
    }
    MutexLock lock(mu_);
    cache.publisher = id_;
    cache.generation = generation_.load(std::memory_order_relaxed);
    cache.value = value_;
    return cache.value;
  }

  // Publishes `value`; readers see it from their next Load.
  void Store(std::shared_ptr<const T> value) {
    MutexLock lock(mu_);
    value_.swap(value);
    generation_.fetch_add(1, std::memory_order_release);
    // The previous snapshot (now in `value`) is released after the lock, possibly freed here.
  }

  // Publishes `desired` only if the current snapshot is still `expected`; true if it did.
  bool CompareAndStore(const T* expected, std::shared_ptr<const T> desired) {
    MutexLock lock(mu_);
    if (value_.get() != expected) {
      return false;
    }
    value_.swap(desired);
    generation_.fetch_add(1, std::memory_order_release);
    return true;
  }

 private:
  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};  // 0 never matches a thread's empty cache
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  const uint64_t id_;
  mutable Mutex mu_;
  std::shared_ptr<const T> value_ ABSL_GUARDED_BY(mu_);
  // Bumped, under mu_, by every publication.
  std::atomic<uint64_t> generation_{0};
};

}  // namespace sluice
