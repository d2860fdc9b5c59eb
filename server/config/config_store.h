// Holds the configuration snapshot in force. Readers take a shared_ptr to an immutable Config
// and keep using it for the whole request even if a reload swaps in a new one meanwhile.
// Thread-safe: Get and Set may race freely; Get takes no lock after a thread's first read of
// each new snapshot (see SnapshotPublisher).
#pragma once

#include <memory>

#include "server/common/snapshot_publisher.h"
#include "server/config/config.h"

namespace sluice {

class ConfigStore {
 public:
  explicit ConfigStore(std::shared_ptr<const Config> initial) { current_.Store(std::move(initial)); }

  std::shared_ptr<const Config> Get() const { return current_.Load(); }
  void Set(std::shared_ptr<const Config> next) { current_.Store(std::move(next)); }

 private:
  SnapshotPublisher<Config> current_;
};

}  // namespace sluice
