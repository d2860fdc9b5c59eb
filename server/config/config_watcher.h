// Reloads the configuration when its files change. Load() compares a fingerprint of the path
// (names, sizes, modification times and inodes of the files, through symlinks, so a Kubernetes
// ConfigMap's ..data swap counts; the whole tree with ConfigLoadOptions::recursive) with the
// last one and, when it differs or when forced (SIGHUP), loads and validates the whole config
// again; what it returns puts the outcome in force: a valid config is swapped into the store; an
// invalid one is logged and rejected, and the running one stays.
// Not thread-safe: one thread at a time calls Load or Poll (ConfigReloader's thread in the
// server); what Load returns may run on another thread.
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

  // The slow half of a reload: if the files changed since the last call (or the constructor),
  // or if `force`, loads and validates them, and logs the config's warnings or why it was
  // rejected. Returns the quick half, which puts the outcome in force (swaps a valid config into
  // the store, then tells the listener); nullptr when nothing changed. The slow half touches
  // the watcher's own members only, never the store or the listener, so a caller may leave it
  // running at shutdown as long as the watcher lives (see ConfigReloader). The quick half must
  // run before the next Load.
  std::function<void()> Load(bool force);

  // Load(force), and what it returns, at once.
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
