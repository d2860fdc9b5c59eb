#include "server/redis/event_loop.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/logging.h"

namespace sluice {

void MicrosToTimeval(int64_t micros, timeval* tv) {
  if (micros < 0) {
    micros = 0;
  }
  tv->tv_sec = static_cast<time_t>(micros / 1000000);
  tv->tv_usec = static_cast<suseconds_t>(micros % 1000000);
}

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(std::string name) {
  event_base* base = event_base_new();
  if (base == nullptr) {
    return absl::InternalError("event_base_new failed");
  }
  int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    int error = errno;
    event_base_free(base);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(error)));
  }
  std::unique_ptr<EventLoop> loop(new EventLoop(std::move(name), base, wake_fd));
  loop->wake_event_ =
      event_new(base, wake_fd, EV_READ | EV_PERSIST, &EventLoop::OnWake, loop.get());
  if (loop->wake_event_ == nullptr || event_add(loop->wake_event_, nullptr) != 0) {
    return absl::InternalError("cannot register the event loop's wake-up event");
  }
  // Everything above happens before the thread starts, so the thread sees it without a lock.
  loop->thread_ = std::thread([raw = loop.get()] { raw->Run(); });
  return loop;
}

EventLoop::EventLoop(std::string name, event_base* base, int wake_fd)
    : name_(std::move(name)), base_(base), wake_fd_(wake_fd) {}

EventLoop::~EventLoop() {
  Stop();
  // Only if the thread never ran (Create failed half-way) can tasks be left; drop them.
  for (TaskNode* node = tasks_.Close(); node != nullptr;) {
    TaskNode* next = node->next;
    delete node;
    node = next;
  }
  if (wake_event_ != nullptr) {
    event_free(wake_event_);
  }
  ::close(wake_fd_);
  event_base_free(base_);
}

bool EventLoop::Post(Task task) {
  auto* node = new TaskNode{std::move(task)};
  switch (tasks_.Push(node)) {
    case decltype(tasks_)::PushResult::kClosed:
      delete node;
      return false;
    case decltype(tasks_)::PushResult::kWasEmpty: {
      // The first task of a burst wakes the loop; the rest ride along.
      uint64_t one = 1;
      ssize_t written = ::write(wake_fd_, &one, sizeof(one));
      (void)written;  // EAGAIN means the counter is saturated: the loop is awake anyway.
      return true;
    }
    case decltype(tasks_)::PushResult::kQueued:
      return true;
  }
  return true;
}

bool EventLoop::IsLoopThread() const {
  return loop_thread_id_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

void EventLoop::Stop() {
  {
    MutexLock lock(stop_mu_);
    if (stopped_) {
      return;
    }
    stopped_ = true;
  }
  if (IsLoopThread()) {
    SLUICE_LOG(FATAL) << "EventLoop::Stop called on its own thread (" << name_ << ")";
  }
  // Queued behind every task posted so far, so those run first; anything posted later runs in
  // Run's final drain or is refused.
  Post([this] { event_base_loopbreak(base_); });
  if (thread_.joinable()) {
    thread_.join();
  }
}

void EventLoop::Run() {
  loop_thread_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  event_base_dispatch(base_);
  // From here on Post refuses new tasks; run the ones that got in before the door closed.
  RunTasks(tasks_.Close());
}

void EventLoop::OnWake(int fd, short events, void* arg) {
  auto* loop = static_cast<EventLoop*>(arg);
  // Reset the counter before taking the queue: a post that lands after the take writes the
  // eventfd again and so wakes the next iteration; one that lands before it is taken now.
  uint64_t count;
  ssize_t got = ::read(fd, &count, sizeof(count));
  (void)got;
  loop->wakeups_.fetch_add(1, std::memory_order_relaxed);
  RunTasks(loop->tasks_.TakeAll());
}

void EventLoop::RunTasks(TaskNode* tasks) {
  while (tasks != nullptr) {
    TaskNode* next = tasks->next;
    std::move(tasks->task)();
    delete tasks;
    tasks = next;
  }
}

LoopTimer::LoopTimer(EventLoop& loop, absl::AnyInvocable<void()> on_fire)
    : event_(event_new(loop.base(), -1, 0, &LoopTimer::OnFire, this)),
      on_fire_(std::move(on_fire)) {
  if (event_ == nullptr) {
    SLUICE_LOG(FATAL) << "event_new failed for a timer";
  }
}

LoopTimer::~LoopTimer() { event_free(event_); }

void LoopTimer::Arm(int64_t delay_us) {
  timeval tv;
  MicrosToTimeval(delay_us, &tv);
  event_add(event_, &tv);
}

void LoopTimer::Cancel() { event_del(event_); }

bool LoopTimer::armed() const { return event_pending(event_, EV_TIMEOUT, nullptr) != 0; }

void LoopTimer::OnFire(int fd, short events, void* arg) {
  auto* timer = static_cast<LoopTimer*>(arg);
  timer->on_fire_();
}

}  // namespace sluice
