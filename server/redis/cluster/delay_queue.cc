#include "server/redis/cluster/delay_queue.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace sluice {

DelayQueue::DelayQueue(const Clock& clock, std::string name)
    : clock_(clock), name_(std::move(name)) {
  thread_ = std::thread([this] { Run(); });
}

DelayQueue::~DelayQueue() { Stop(); }

void DelayQueue::Schedule(int64_t due_monotonic_us, Task task) {
  {
    MutexLock lock(mu_);
    if (!stopped_) {
      heap_.push_back(Entry{due_monotonic_us, next_seq_++, std::move(task)});
      std::push_heap(heap_.begin(), heap_.end(), &DelayQueue::Later);
      // Only a new earliest entry changes how long the thread should sleep.
      if (heap_.front().seq == next_seq_ - 1) {
        changed_.NotifyOne();
      }
      return;
    }
  }
  std::move(task)(/*cancelled=*/true);
}

void DelayQueue::Run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  thread_id_.store(std::this_thread::get_id());
  mu_.Lock();
  while (!stopped_) {
    if (heap_.empty()) {
      changed_.Wait(mu_);
      continue;
    }
    int64_t wait_us = heap_.front().due_us - clock_.MonotonicMicros();
    if (wait_us > 0) {
      changed_.WaitFor(mu_, wait_us);
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), &DelayQueue::Later);
    Task task = std::move(heap_.back().task);
    heap_.pop_back();
    mu_.Unlock();
    std::move(task)(/*cancelled=*/false);
    mu_.Lock();
  }
  mu_.Unlock();
}

void DelayQueue::Stop() {
  std::vector<Entry> cancelled;
  std::thread thread;
  {
    MutexLock lock(mu_);
    stopped_ = true;
    cancelled.swap(heap_);
    thread = std::move(thread_);  // a second Stop finds nothing to join
    changed_.NotifyAll();
  }
  if (thread.joinable()) {
    thread.join();
  }
  // In due order, so callers see the same order as they would have.
  std::sort(cancelled.begin(), cancelled.end(),
            [](const Entry& a, const Entry& b) { return Later(b, a); });
  for (Entry& entry : cancelled) {
    std::move(entry.task)(/*cancelled=*/true);
  }
}

size_t DelayQueue::pending() const {
  MutexLock lock(mu_);
  return heap_.size();
}

}  // namespace sluice
