// A lock-free multi-producer, single-consumer queue of intrusive nodes, used to hand work to an
// I/O thread without a lock on the caller's path: producers push with one CAS onto a stack, the
// consumer takes the whole stack with one exchange and reverses it, so it gets the work in push
// order and as many items per wake-up as have piled up. Push tells the producer whether the
// queue was empty, which is exactly when the consumer needs waking.
//
// Thread-safety: Push from any number of threads; TakeAll and Close from one consumer thread at
// a time. The queue never owns nodes; whoever takes them does.
#pragma once

#include <atomic>
#include <cstdint>

namespace sluice {

// T has a member `T* next` used as the link; `kNext` points to it.
template <typename T, T* T::*kNext>
class MpscQueue {
 public:
  enum class PushResult {
    kWasEmpty,  // queued, and the queue was empty: wake the consumer
    kQueued,    // queued behind other nodes: the consumer has been woken already
    kClosed,    // not queued: the queue is closed and the caller still owns `node`
  };

  MpscQueue() = default;
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  PushResult Push(T* node) {
    T* head = head_.load(std::memory_order_relaxed);
    do {
      if (head == Closed()) {
        return PushResult::kClosed;
      }
      node->*kNext = head;
    } while (!head_.compare_exchange_weak(head, node, std::memory_order_release,
                                          std::memory_order_relaxed));
    return head == nullptr ? PushResult::kWasEmpty : PushResult::kQueued;
  }

  // Takes every queued node as a list linked through kNext, oldest first; nullptr if there is
  // none or the queue is closed.
  T* TakeAll() {
    T* head = head_.load(std::memory_order_acquire);
    do {
      if (head == nullptr || head == Closed()) {
        return nullptr;
      }
    } while (!head_.compare_exchange_weak(head, nullptr, std::memory_order_acquire,
                                          std::memory_order_acquire));
    return Reverse(head);
  }

  // Like TakeAll, and every later Push fails with kClosed. Idempotent.
  T* Close() {
    T* head = head_.exchange(Closed(), std::memory_order_acq_rel);
    return head == Closed() ? nullptr : Reverse(head);
  }

  bool closed() const { return head_.load(std::memory_order_acquire) == Closed(); }

  // Whether nothing is queued and the queue is open; any thread, a snapshot.
  bool empty() const { return head_.load(std::memory_order_acquire) == nullptr; }

 private:
  // A sentinel no node can have as its address.
  static T* Closed() { return reinterpret_cast<T*>(uintptr_t{1}); }

  static T* Reverse(T* head) {
    T* reversed = nullptr;
    while (head != nullptr) {
      T* next = head->*kNext;
      head->*kNext = reversed;
      reversed = head;
      head = next;
    }
    return reversed;
  }

  std::atomic<T*> head_{nullptr};
};

}  // namespace sluice
