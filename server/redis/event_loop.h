// One I/O thread running a libevent event_base, the home of Redis connections: everything
// registered on the loop's base (Redis sockets, timers) is touched only by the loop thread.
// Other threads hand it work with Post: a lock-free queue plus an eventfd that is written only
// when the queue goes from empty to non-empty, so a burst of posts costs one wake-up and the
// loop runs the whole burst in one go.
//
// Thread-safety: Post, IsLoopThread and Stop are safe from any thread (Stop not from the loop
// thread itself). base() and LoopTimer belong to the loop thread once the loop runs.
#pragma once

#include <sys/time.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "server/common/mutex.h"
#include "server/redis/mpsc_queue.h"

struct event;
struct event_base;

namespace sluice {

class EventLoop {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // Creates the event_base and starts the thread. `name` names the thread (first 15 chars) for
  // debuggers and logs. Fails with kInternal if libevent or eventfd cannot be set up.
  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(std::string name);

  // Stops the loop (see Stop). Whatever still uses base() must be gone by now.
  ~EventLoop();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Queues `task` to run on the loop thread, after every task this thread posted before it.
  // Never blocks and never runs `task` inline, even when called on the loop thread. Returns
  // false if the loop has stopped taking tasks; `task` is then destroyed without running.
  bool Post(Task task);

  // True when called on this loop's thread.
  bool IsLoopThread() const;

  // Runs the tasks already queued, leaves the loop and joins the thread; later Posts return
  // false. Idempotent. REQUIRES: not called on the loop thread.
  void Stop();

  // The loop's event_base, for sockets and timers. REQUIRES: used on the loop thread only.
  event_base* base() const { return base_; }
  const std::string& name() const { return name_; }

  // How many times posted work woke the loop (for tests and metrics); at most the number of
  // Posts, and far fewer under load.
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

 private:
  struct TaskNode {
    Task task;
    TaskNode* next = nullptr;
  };

  EventLoop(std::string name, event_base* base, int wake_fd);

  void Run();
  static void OnWake(int fd, short events, void* arg);
  // Runs and deletes a list of nodes in order.
  static void RunTasks(TaskNode* tasks);

  const std::string name_;
  event_base* const base_;
  const int wake_fd_;
  event* wake_event_ = nullptr;
  MpscQueue<TaskNode, &TaskNode::next> tasks_;
  std::atomic<std::thread::id> loop_thread_id_{};
  std::atomic<uint64_t> wakeups_{0};

  Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

// A one-shot timer on a loop. Arming an armed timer moves its expiry.
// REQUIRES: constructed, used and destroyed on the loop thread, or while the loop thread is not
// running (before Create returns it to anyone who could arm it, or after Stop).
class LoopTimer {
 public:
  LoopTimer(EventLoop& loop, absl::AnyInvocable<void()> on_fire);
  ~LoopTimer();
  LoopTimer(const LoopTimer&) = delete;
  LoopTimer& operator=(const LoopTimer&) = delete;

  // Fires `on_fire` once, `delay_us` microseconds from now (at once if <= 0, but never inline).
  void Arm(int64_t delay_us);
  void Cancel();
  bool armed() const;

 private:
  static void OnFire(int fd, short events, void* arg);

  event* event_;
  absl::AnyInvocable<void()> on_fire_;
};

// Converts microseconds to the timeval libevent wants, clamping negatives to zero.
void MicrosToTimeval(int64_t micros, timeval* tv);

}  // namespace sluice
