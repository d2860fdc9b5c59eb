// Tells when the config path may have changed, through inotify, so that a reload follows an
// edit within milliseconds rather than at the next poll. It only wakes the caller: whether the
// config really changed is ConfigWatcher's fingerprint to decide.
//
// Watched: a file's directory (editors and Kubernetes replace files by renaming into it), or a
// directory, and with `recursive` every directory below it except Kubernetes' "..*" internals.
// A ConfigMap mount's update (new "..<timestamp>" directory, "..data" symlink renamed over) is
// a rename in the watched directory, so it is seen.
// Not thread-safe: one thread polls fd() and calls Drain.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace sluice {

class ConfigChangeNotifier {
 public:
  static absl::StatusOr<std::unique_ptr<ConfigChangeNotifier>> Create(const std::string& path,
                                                                      bool recursive);
  ~ConfigChangeNotifier();
  ConfigChangeNotifier(const ConfigChangeNotifier&) = delete;
  ConfigChangeNotifier& operator=(const ConfigChangeNotifier&) = delete;

  // Readable (poll) when events are pending.
  int fd() const { return fd_; }
  // Reads every pending event without blocking, and watches directories that appeared; true if
  // there was any.
  bool Drain();

 private:
  ConfigChangeNotifier(int fd, std::string path, bool recursive)
      : fd_(fd), path_(std::move(path)), recursive_(recursive) {}
  // Adds watches for the watched directories (adding one twice is harmless).
  void WatchAll();

  const int fd_;
  const std::string path_;
  const bool recursive_;
};

}  // namespace sluice
