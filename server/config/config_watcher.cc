#include "server/config/config_watcher.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/logging.h"
#include "server/config/config_loader.h"

namespace sluice {
namespace {

void AppendStat(const std::string& file, std::string* out) {
  struct stat st;
  if (::stat(file.c_str(), &st) == 0) {
    absl::StrAppend(out, file, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec,
                    ":", st.st_ino, ";");
  }
}

}  // namespace

ConfigWatcher::ConfigWatcher(std::string path, ConfigLoadOptions options, ConfigStore& store,
                             Listener listener)
    : path_(std::move(path)),
      options_(options),
      store_(store),
      listener_(std::move(listener)) {
  fingerprint_ = Fingerprint();
}

std::string ConfigWatcher::Fingerprint() const {
  std::string out;
  std::error_code ec;
  if (std::filesystem::is_directory(path_, ec)) {
    std::vector<std::string> files;
    if (options_.recursive) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(path_, ec)) {
        files.push_back(entry.path().string());
      }
    } else {
      for (const auto& entry : std::filesystem::directory_iterator(path_, ec)) {
        files.push_back(entry.path().string());
      }
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      AppendStat(f, &out);
    }
  } else {
    AppendStat(path_, &out);
  }
  return out;
}

std::function<void()> ConfigWatcher::Load(bool force) {
  std::string now = Fingerprint();
  if (!force && now == fingerprint_) {
    return nullptr;
  }
  fingerprint_ = std::move(now);
  SLUICE_LOG(INFO) << "config reload: loading " << path_
                   << (force ? " (asked for)" : " (files changed)");
  auto loaded = LoadConfigPath(path_, options_);
  if (!loaded.ok()) {
    SLUICE_LOG(ERROR) << "config reload rejected, keeping the running config: "
                      << loaded.status().message();
    return [this] { listener_(false, nullptr); };
  }
  std::shared_ptr<const Config> next(std::move(*loaded));
  for (const std::string& warning : next->warnings()) {
    SLUICE_LOG(WARNING) << "config: " << warning;
  }
  next->Dump();  // built here, off the quick half and off the HTTP thread that serves /config
  return [this, next = std::move(next)] {
    store_.Set(next);
    SLUICE_LOG(INFO) << "config reloaded from " << path_ << ": " << next->RuleCount()
                     << " rules";
    listener_(true, next.get());
  };
}

void ConfigWatcher::Poll(bool force) {
  if (std::function<void()> apply = Load(force)) {
    apply();
  }
}

}  // namespace sluice
