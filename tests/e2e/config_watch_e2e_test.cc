// End-to-end: a config directory laid out as Kubernetes mounts a ConfigMap (files that are
// symlinks into "..data", itself a symlink to a timestamped directory, swapped by a rename) is
// reloaded within a second of an update, by inotify, with polling left an hour apart; a broken
// update is rejected and counted; --config_watch=false leaves it to polling.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using testing::HttpGet;
using testing::SluiceServer;
using testing::TempDir;
using ::testing::HasSubstr;

std::string Config(const std::string& key) {
  return absl::StrCat("domain: watch\ndescriptors:\n  - key: ", key,
                      "\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n");
}

class ConfigWatchTest : public ::testing::Test {
 protected:
  // Writes `text` as version `version` of the mount and points ..data at it, as the kubelet
  // does: a new timestamped directory, a ..data_tmp symlink, renamed over ..data.
  void Publish(int version, const std::string& text) {
    const std::string stamp = absl::StrCat("..2026_11_24_00_00_0", version);
    dir_.WriteFile(absl::StrCat("mount/", stamp, "/watch.yaml"), text);
    const fs::path mount = fs::path(dir_.path()) / "mount";
    fs::create_directory_symlink(stamp, mount / "..data_tmp");
    fs::rename(mount / "..data_tmp", mount / "..data");
    if (!fs::exists(mount / "watch.yaml", error_) && !fs::is_symlink(mount / "watch.yaml")) {
      fs::create_symlink("..data/watch.yaml", mount / "watch.yaml");
    }
  }

  void Start(bool watch) {
    Publish(1, Config("first"));
    auto started = SluiceServer::Start(
        dir_.path() + "/mount",
        {"--config_poll_interval=1h", absl::StrCat("--config_watch=", watch ? "true" : "false")},
        dir_.path());
    ASSERT_TRUE(started.ok()) << started.status();
    sluice_ = std::move(*started);
    ASSERT_THAT(HttpGet(sluice_->http_port(), "/config"), HasSubstr("watch.first"));
  }

  // How long until /config shows `text`, polled every 10 ms, up to `limit` (then `limit`).
  std::chrono::milliseconds TimeUntilConfigShows(const std::string& text,
                                                 std::chrono::milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < limit) {
      if (HttpGet(sluice_->http_port(), "/config").find(text) != std::string::npos) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return limit;
  }

  TempDir dir_;
  std::error_code error_;
  std::unique_ptr<SluiceServer> sluice_;
};

// Verifies a ConfigMap-style update is in force within a second, and a broken one is rejected
// (the running config stays) and counted.
TEST_F(ConfigWatchTest, ConfigMapSwapReloadsWithinASecond) {
  Start(/*watch=*/true);
  if (HasFatalFailure()) return;
  Publish(2, Config("second"));
  const auto took = TimeUntilConfigShows("watch.second", std::chrono::seconds(5));
  std::printf("ConfigMap update in force after %lld ms\n", static_cast<long long>(took.count()));
  EXPECT_LT(took, std::chrono::seconds(1));

  Publish(3, "domain: watch\ndescriptors: [unclosed\n");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::string metrics;
  while (std::chrono::steady_clock::now() < deadline) {
    metrics = HttpGet(sluice_->http_port(), "/metrics");
    if (metrics.find("sluice_config_reloads_total{result=\"rejected\"} 1") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(metrics, HasSubstr("sluice_config_reloads_total{result=\"rejected\"} 1"));
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/config"), HasSubstr("watch.second"));
  EXPECT_THAT(sluice_->ReadLog(), HasSubstr("watch.yaml:"));
}

// Verifies that without the watch nothing reloads before the next poll (an hour away): the
// test above is inotify's doing.
TEST_F(ConfigWatchTest, WithoutTheWatchOnlyPollingReloads) {
  Start(/*watch=*/false);
  if (HasFatalFailure()) return;
  Publish(2, Config("second"));
  EXPECT_EQ(TimeUntilConfigShows("watch.second", std::chrono::milliseconds(1500)),
            std::chrono::milliseconds(1500));
}

}  // namespace
}  // namespace sluice
