// Reloads the configuration when its files change. Poll() compares a fingerprint of the path
// (names, sizes, modification times and inodes of the files, through symlinks, so a Kubernetes
// ConfigMap's ..data swap counts; the whole tree with ConfigLoadOptions::recursive) with the last one and, when it
// differs or when forced (SIGHUP), loads and validates the whole config again: a valid config is
// swapped into the store; an invalid one is logged and rejected, and the running one stays.
// Not thread-safe: one thread calls Poll.
#pragma once

#include <functional>
#include <string>

#include "server/config/config_loader.h"
#include "server/config/config_store.h"

namespace sluice {

class ConfigWatcher {
 public:
  // Called after each reload attempt with its outcome and, when it succeeded, the new config.
  using Listener = std::function<void(bool ok, const Config* config)>;

  ConfigWatcher(std::string path, ConfigLoadOptions options, ConfigStore& store,
                Listener listener);

  // Reloads if the files changed since the last Poll (or the constructor), or if `force`.
  void Poll(bool force);

 private:
  std::string Fingerprint() const;

  const std::string path_;
  const ConfigLoadOptions options_;
  ConfigStore& store_;
  Listener listener_;
  std::string fingerprint_;
};

}  // namespace sluice
