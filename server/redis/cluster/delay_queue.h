// A thread that runs tasks at given times: the cluster client's retries after TRYAGAIN,
// CLUSTERDOWN or a lost node wait here for their few milliseconds of backoff, off the I/O
// threads and without a libevent timer each.
//
// Each task runs exactly once: on the queue's thread when its time comes (cancelled = false),
// or with cancelled = true when the queue stops first, on the thread calling Stop, or inline in
// Schedule if the queue has already stopped. Tasks due at the same time run in Schedule order.
// Times are the injected clock's MonotonicMicros; the thread sleeps for the difference in real
// time, so it suits RealClock (a FakeClock's jumps are noticed at the next wake-up only).
//
// Thread-safety: Schedule and Stop are safe from any thread; Stop not from a task.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"

namespace sluice {

class DelayQueue {
 public:
  using Task = absl::AnyInvocable<void(bool cancelled) &&>;

  // Starts the thread. `clock` must outlive the queue.
  DelayQueue(const Clock& clock, std::string name);
  // Stop()s.
  ~DelayQueue();
  DelayQueue(const DelayQueue&) = delete;
  DelayQueue& operator=(const DelayQueue&) = delete;

  // Runs `task` at `due_monotonic_us` or soon after (at once if that has passed, but never
  // inline unless the queue has stopped). Never blocks beyond a short lock.
  void Schedule(int64_t due_monotonic_us, Task task);

  // Runs every pending task with cancelled = true, on this thread, and joins the queue's thread.
  // Later Schedules run their task inline, cancelled. Idempotent.
  // REQUIRES: not called from a task.
  void Stop();

  // Tasks waiting right now.
  size_t pending() const;

  // True when called from a task, on the queue's thread.
  bool IsQueueThread() const { return std::this_thread::get_id() == thread_id_.load(); }

 private:
  struct Entry {
    int64_t due_us;
    uint64_t seq;
    Task task;
  };
  // Orders the heap so that the earliest (then first scheduled) entry is on top.
  static bool Later(const Entry& a, const Entry& b) {
    return a.due_us != b.due_us ? a.due_us > b.due_us : a.seq > b.seq;
  }

  void Run();

  const Clock& clock_;
  const std::string name_;
  mutable Mutex mu_;
  CondVar changed_;
  std::vector<Entry> heap_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // set by the constructor; Stop moves it out under mu_
  std::atomic<std::thread::id> thread_id_{};
};

}  // namespace sluice
