// End-to-end: what a config may cost the real build/bin/sluice. A file of nested YAML aliases
// (gigabytes once expanded) is refused by --check_config and by a live reload, which keeps the
// running config; a reload runs off the main loop, so SIGTERM is honoured while one is still
// loading; --check_config warns of sliding_window_log rules whose keys grow large.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::HttpGet;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;

constexpr char kGood[] = R"(domain: limits
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 7
)";

// The 495-byte file of the report (issue 29): seven levels of ten aliases under metadata,
// 10^8 scalars once expanded.
std::string AliasBomb() {
  std::string text = absl::StrCat(kGood, "    metadata:\n      x0: &a0 [lol, lol, lol, lol, "
                                         "lol, lol, lol, lol, lol, lol]\n");
  for (int level = 1; level <= 7; ++level) {
    absl::StrAppend(&text, "      x", level, ": &a", level, " [");
    for (int i = 0; i < 10; ++i) {
      absl::StrAppend(&text, i == 0 ? "" : ", ", "*a", level - 1);
    }
    absl::StrAppend(&text, "]\n");
  }
  return text;
}

// A valid config that takes a while to load (a few hundred thousand metadata values, within
// the default budget), and that moves the limit to 9.
std::string SlowConfig() {
  std::string text = "domain: limits\ndescriptors:\n  - key: user\n    rate_limit:\n"
                     "      unit: hour\n      requests_per_unit: 9\n    metadata:\n      big: [";
  for (int i = 0; i < 400'000; ++i) {
    absl::StrAppend(&text, i == 0 ? "1" : ",1");
  }
  absl::StrAppend(&text, "]\n");
  return text;
}

std::string Bin(const std::string& name) { return SluiceServer::BinaryPath(name); }

class ConfigLimitsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.WriteFile("config/limits.yaml", kGood);
    auto started = SluiceServer::Start(
        dir_.path() + "/config", {"--config_poll_interval=1h", "--config_watch=false"},
        dir_.path());
    ASSERT_TRUE(started.ok()) << started.status();
    sluice_ = std::move(*started);
    client_ = std::make_unique<RlsClient>(sluice_->grpc_address());
  }

  // The limit the running config applies to user=<value>, or 0 if none answered.
  uint32_t UserLimit(const std::string& value) {
    auto request = BuildRequest("limits", {"user=" + value}, 0);
    EXPECT_TRUE(request.ok());
    auto response = client_->ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok() || response->statuses_size() != 1) {
      return 0;
    }
    return response->statuses(0).current_limit().requests_per_unit();
  }

  // Waits up to 20 s for the log to contain `text`.
  bool WaitForLog(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (absl::StrContains(sluice_->ReadLog(), text)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  TempDir dir_;
  std::string config_;
  std::unique_ptr<SluiceServer> sluice_;
  std::unique_ptr<RlsClient> client_;
};

// Verifies --check_config refuses the alias bomb with the file, line, field and limit, instead
// of expanding it.
TEST(ConfigLimitsCheckTest, CheckConfigRefusesAliasBomb) {
  TempDir dir;
  const std::string bomb = dir.WriteFile("bomb.yaml", AliasBomb());
  auto [status, out] = RunCommand(Bin("sluice") + " --check_config --config=" + bomb);
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr(bomb + ":13: descriptors[0].metadata.x5[7]: the configuration "
                                    "grows past 1000000 YAML nodes (--config_max_nodes)"));
}

// Verifies --check_config names a file over --config_max_file_bytes, and warns of a
// sliding_window_log rule whose key can pass 1 MiB.
TEST(ConfigLimitsCheckTest, CheckConfigFileCapAndLargeKeyWarning) {
  TempDir dir;
  const std::string log = dir.WriteFile(
      "log.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: "
                  "sliding_window_log, unit: second, requests_per_unit: 1000000}\n");
  auto [status, out] = RunCommand(Bin("sluice") + " --check_config --config=" + log);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("warning: " + log + ":4: descriptors[0].rate_limit: "
                             "sliding_window_log keeps one entry per admitted request, so one "
                             "key can grow to 1000000 entries, about 114 MiB in Redis"));
  auto [capped, capped_out] = RunCommand(
      Bin("sluice") + " --check_config --config_max_file_bytes=64 --config=" + log);
  EXPECT_EQ(capped, 1) << capped_out;
  EXPECT_THAT(capped_out, HasSubstr(log + ": file is larger than 64 bytes "
                                          "(--config_max_file_bytes); not parsed"));
}

// Verifies a live reload of the alias bomb is rejected and counted, and the running config
// keeps answering.
TEST_F(ConfigLimitsE2eTest, ReloadOfAliasBombIsRejectedAndRunningConfigStays) {
  if (HasFatalFailure()) return;
  ASSERT_EQ(UserLimit("ann"), 7u);
  dir_.WriteFile("config/limits.yaml", AliasBomb());
  ASSERT_EQ(::kill(sluice_->process().pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForLog("config reload rejected")) << sluice_->ReadLog();
  EXPECT_THAT(sluice_->ReadLog(), HasSubstr("limits.yaml:13: descriptors[0].metadata.x5[7]: "
                                            "the configuration grows past 1000000 YAML nodes"));
  EXPECT_THAT(HttpGet(sluice_->http_port(), "/metrics"),
              HasSubstr("sluice_config_reloads_total{result=\"rejected\"} 1"));
  EXPECT_EQ(UserLimit("bob"), 7u);
}

// Verifies SIGTERM is honoured while a reload is still loading: the process drains and exits 0
// without waiting for the load, whose config is never put in force.
TEST_F(ConfigLimitsE2eTest, SigtermDuringSlowReloadExitsWithoutWaiting) {
  if (HasFatalFailure()) return;
  dir_.WriteFile("config/limits.yaml", SlowConfig());
  ASSERT_EQ(::kill(sluice_->process().pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForLog("config reload: loading")) << sluice_->ReadLog();
  const int status = sluice_->process().Stop(SIGTERM, std::chrono::seconds(20));
  ASSERT_NE(status, -1) << sluice_->ReadLog();
  ASSERT_TRUE(WIFEXITED(status)) << sluice_->ReadLog();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string log = sluice_->ReadLog();
  EXPECT_THAT(log, HasSubstr("stopped (a config reload still loading was abandoned)"));
  EXPECT_THAT(log, Not(HasSubstr("config reloaded from")));
}

// Verifies the same slow config is within the default budget and is put in force when left to
// load, so the test above did stop a load that would have succeeded.
TEST_F(ConfigLimitsE2eTest, SlowReloadCompletesWhenLeftToRun) {
  if (HasFatalFailure()) return;
  dir_.WriteFile("config/limits.yaml", SlowConfig());
  ASSERT_EQ(::kill(sluice_->process().pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForLog("config reloaded from")) << sluice_->ReadLog();
  EXPECT_EQ(UserLimit("cid"), 9u);
}

}  // namespace
}  // namespace sluice
