// A slot on a config node where a later layer keeps what it resolved once for that node, so
// that a request finds it without a lookup (the metrics layer keeps the counters of the node's
// stat key). The config layer knows nothing of what is kept.
// Set at most once, by whichever reader comes first; freed with the node, so with its config
// snapshot. Get and Set are safe from any thread. Nodes live where they are built, so a memo
// never moves.
#pragma once

#include <atomic>
#include <memory>

namespace sluice {

class NodeMemo {
 public:
  // What is kept; the one layer that sets a memo knows its dynamic type.
  class Value {
   public:
    virtual ~Value() = default;
  };

  NodeMemo() = default;
  NodeMemo(const NodeMemo&) = delete;
  NodeMemo& operator=(const NodeMemo&) = delete;
  ~NodeMemo() { delete value_.load(std::memory_order_acquire); }

  // The value kept, or null.
  const Value* Get() const { return value_.load(std::memory_order_acquire); }

  // Keeps `value` unless another was kept first; returns the one kept.
  const Value* Set(std::unique_ptr<Value> value) const {
    Value* expected = nullptr;
    if (value_.compare_exchange_strong(expected, value.get(), std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      return value.release();
    }
    return expected;
  }

 private:
  mutable std::atomic<Value*> value_{nullptr};
};

}  // namespace sluice
