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
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      heap_.push_back(Entry{due_monotonic_us, next_seq_++, std::move(task)});
      std::push_heap(heap_.begin(), heap_.end(), &DelayQueue::Later);
      // Only a new earliest entry changes how long the thread should sleep.
      if (heap_.front().seq == next_seq_ - 1) {
        changed_.notify_one();
      }
      return;
    }
  }
  std::move(task)(/*cancelled=*/true);
}

void DelayQueue::Run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  thread_id_.store(std::this_thread::get_id());
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopped_) {
    if (heap_.empty()) {
      changed_.wait(lock);
      continue;
    }
    int64_t wait_us = heap_.front().due_us - clock_.MonotonicMicros();
    if (wait_us > 0) {
      changed_.wait_for(lock, std::chrono::microseconds(wait_us));
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), &DelayQueue::Later);
    Task task = std::move(heap_.back().task);
    heap_.pop_back();
    lock.unlock();
    std::move(task)(/*cancelled=*/false);
    lock.lock();
  }
}

void DelayQueue::Stop() {
  std::vector<Entry> cancelled;
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    cancelled.swap(heap_);
    thread = std::move(thread_);  // a second Stop finds nothing to join
    changed_.notify_all();
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
  std::lock_guard<std::mutex> lock(mu_);
  return heap_.size();
}

}  // namespace sluice
