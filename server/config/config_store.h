// Holds the configuration snapshot in force. Readers take a shared_ptr to an immutable Config
// and keep using it for the whole request even if a reload swaps in a new one meanwhile.
// Thread-safe: Get and Set may race freely.
#pragma once

#include <atomic>
#include <memory>

#include "server/config/config.h"

namespace sluice {

class ConfigStore {
 public:
  explicit ConfigStore(std::shared_ptr<const Config> initial) : current_(std::move(initial)) {}

  std::shared_ptr<const Config> Get() const { return current_.load(std::memory_order_acquire); }
  void Set(std::shared_ptr<const Config> next) {
    current_.store(std::move(next), std::memory_order_release);
  }

 private:
  std::atomic<std::shared_ptr<const Config>> current_;
};

}  // namespace sluice
