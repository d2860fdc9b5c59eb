#include "server/config/config_notifier.h"

#include <errno.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

constexpr uint32_t kEvents = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM |
                             IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;

}  // namespace

absl::StatusOr<std::unique_ptr<ConfigChangeNotifier>> ConfigChangeNotifier::Create(
    const std::string& path, bool recursive) {
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("inotify_init1: ", std::strerror(errno)));
  }
  std::unique_ptr<ConfigChangeNotifier> notifier(new ConfigChangeNotifier(fd, path, recursive));
  notifier->WatchAll();
  return notifier;
}

ConfigChangeNotifier::~ConfigChangeNotifier() { close(fd_); }

void ConfigChangeNotifier::WatchAll() {
  std::error_code error;
  const std::filesystem::path root(path_);
  if (!std::filesystem::is_directory(root, error)) {
    // A file: its directory, where replacing it by a rename shows.
    const std::filesystem::path parent = root.has_parent_path() ? root.parent_path() : ".";
    inotify_add_watch(fd_, parent.c_str(), kEvents);
    return;
  }
  inotify_add_watch(fd_, root.c_str(), kEvents);
  if (!recursive_) {
    return;
  }
  for (auto it = std::filesystem::recursive_directory_iterator(root, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (!it->is_directory(error) || it->is_symlink(error)) {
      continue;
    }
    if (absl::StartsWith(it->path().filename().string(), "..")) {
      it.disable_recursion_pending();  // a ConfigMap's timestamped copies: "..data" decides
      continue;
    }
    inotify_add_watch(fd_, it->path().c_str(), kEvents);
  }
}

bool ConfigChangeNotifier::Drain() {
  alignas(inotify_event) char buffer[16 * 1024];
  bool any = false;
  while (true) {
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n <= 0) {
      break;  // EAGAIN: nothing more for now
    }
    any = true;
  }
  if (any) {
    WatchAll();  // a directory may have appeared, or the watched one been replaced
  }
  return any;
}

}  // namespace sluice
