#include "server/process/lifecycle.h"

#include <signal.h>
#include <time.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/common/status_macros.h"
#include "server/process/assembly.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using testing::FreePort;
using testing::GrpcHealthCheck;
using ::testing::HasSubstr;
using testing::HttpGet;
using testing::TempDir;
using testing::WaitForPort;

constexpr char kServing[] = "\x08\x01";

// A waiter made and waited on until a stop signal, as Lifecycle::Run waits once serving.
absl::StatusOr<int> WaitForStopSignal(absl::Duration poll_interval, ConfigChangeNotifier* notifier,
                                      std::function<void(bool force)> request_reload) {
  ASSIGN_OR_RETURN(std::unique_ptr<StopSignalWaiter> waiter,
                   StopSignalWaiter::Create(poll_interval, notifier, std::move(request_reload)));
  return waiter->Wait();
}

// Takes the process's signals as the server does, and gives them back afterwards, dropping
// any still pending so that none ends the test binary.
class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { TakeProcessSignals(); }
  void TearDown() override {
    sigset_t signals;
    sigemptyset(&signals);
    for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
      sigaddset(&signals, signal);
    }
    const timespec now = {0, 0};
    while (sigtimedwait(&signals, nullptr, &now) > 0) {
    }
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  }
};

// Verifies the signals are blocked for the signalfd and a broken pipe is ignored.
TEST_F(LifecycleTest, TakesTheProcessSignals) {
  sigset_t blocked;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &blocked), 0);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    EXPECT_TRUE(sigismember(&blocked, signal)) << signal;
  }
  struct sigaction pipe {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &pipe), 0);
  EXPECT_EQ(pipe.sa_handler, SIG_IGN);
}

// Verifies SIGHUP asks for a forced reload and SIGTERM ends the wait, returning its number.
TEST_F(LifecycleTest, SighupForcesAReloadAndSigtermStops) {
  std::vector<bool> reloads;
  ASSERT_EQ(raise(SIGHUP), 0);
  absl::StatusOr<int> stop = WaitForStopSignal(absl::ZeroDuration(), nullptr, [&](bool force) {
    reloads.push_back(force);
    raise(SIGTERM);
  });
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_EQ(*stop, SIGTERM);
  EXPECT_THAT(reloads, ElementsAre(true));
}

// Verifies each poll interval asks for an unforced reload until SIGINT.
TEST_F(LifecycleTest, EveryPollAsksForAReload) {
  int polls = 0;
  const absl::Time start = absl::Now();
  absl::StatusOr<int> stop = WaitForStopSignal(absl::Milliseconds(20), nullptr, [&](bool force) {
    EXPECT_FALSE(force);
    if (++polls == 3) {
      raise(SIGINT);
    }
  });
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_EQ(*stop, SIGINT);
  EXPECT_EQ(polls, 3);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(60));
}

// Verifies a change the notifier sees asks for an unforced reload, without any poll.
TEST_F(LifecycleTest, AChangeUnderTheConfigAsksForAReload) {
  TempDir dir;
  dir.WriteFile("a.yaml", "domain: a\n");
  auto notifier = ConfigChangeNotifier::Create(dir.path(), /*recursive=*/false);
  ASSERT_TRUE(notifier.ok()) << notifier.status();
  dir.WriteFile("b.yaml", "domain: b\n");
  std::vector<bool> reloads;
  absl::StatusOr<int> stop =
      WaitForStopSignal(absl::ZeroDuration(), notifier->get(), [&](bool force) {
        reloads.push_back(force);
        raise(SIGTERM);
      });
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_THAT(reloads, ElementsAre(false));
}

// Verifies a waiter's deadline ends a wait without a signal (nullopt), SIGHUP meanwhile asking
// for a forced reload, and that the same waiter then returns a stop signal.
TEST_F(LifecycleTest, WaiterReturnsAtItsDeadlineOrOnAStopSignal) {
  std::vector<bool> reloads;
  auto waiter = StopSignalWaiter::Create(absl::ZeroDuration(), nullptr,
                                         [&](bool force) { reloads.push_back(force); });
  ASSERT_TRUE(waiter.ok()) << waiter.status();
  ASSERT_EQ(raise(SIGHUP), 0);
  const absl::Time start = absl::Now();
  EXPECT_EQ((*waiter)->WaitUntil(start + absl::Milliseconds(50)), std::nullopt);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_THAT(reloads, ElementsAre(true));
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ((*waiter)->WaitUntil(absl::InfiniteFuture()), SIGTERM);
}

constexpr char kConfig[] =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n";

// Settings for a memory-backed server on free loopback ports, serving `config_path`.
Settings ServerSettings(const std::string& config_path) {
  Settings settings;
  settings.config.path = config_path;
  settings.config.watch = false;
  settings.config.poll_interval = absl::ZeroDuration();
  settings.grpc.address = absl::StrCat("127.0.0.1:", FreePort());
  settings.http.address = absl::StrCat("127.0.0.1:", FreePort());
  settings.shutdown_grace = absl::Seconds(1);
  return settings;
}

// Verifies the whole life on one memory-backed server: it listens and answers health, a
// SIGHUP puts a changed config in force, and SIGTERM drains it (both listeners closed) and
// ends Run with OK.
TEST_F(LifecycleTest, RunStartsReloadsAndDrains) {
  TempDir dir;
  const std::string config_path = dir.WriteFile("limits.yaml", kConfig);
  const Settings settings = ServerSettings(config_path);
  auto config = LoadConfigPath(config_path);
  ASSERT_TRUE(config.ok()) << config.status();
  auto parts = Assembly::Create(settings, std::move(*config));
  ASSERT_TRUE(parts.ok()) << parts.status();
  const int http_port = std::stoi(settings.http.address.substr(10));

  std::string health_before;
  std::string config_after_reload;
  // Threads started after TakeProcessSignals block the signals too: the signalfd takes them.
  std::thread client([&] {
    if (!WaitForPort(http_port, std::chrono::seconds(20))) {
      kill(getpid(), SIGTERM);
      return;
    }
    health_before = GrpcHealthCheck(settings.grpc.address, "ratelimit");
    dir.WriteFile("limits.yaml",
                  absl::StrReplaceAll(kConfig, {{"requests_per_unit: 5", "requests_per_unit: 9"}}));
    kill(getpid(), SIGHUP);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline &&
           !absl::StrContains(config_after_reload, "requests_per_unit=9")) {
      config_after_reload = HttpGet(http_port, "/config");
      absl::SleepFor(absl::Milliseconds(20));
    }
    kill(getpid(), SIGTERM);
  });
  const absl::Status run = Lifecycle(**parts, settings).Run();
  client.join();
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_EQ(health_before, kServing);
  EXPECT_THAT(config_after_reload, HasSubstr("requests_per_unit=9"));
  EXPECT_FALSE(WaitForPort(http_port, std::chrono::milliseconds(100)));
  const int grpc_port = std::stoi(settings.grpc.address.substr(10));
  EXPECT_FALSE(WaitForPort(grpc_port, std::chrono::milliseconds(100)));
}

// Verifies a gRPC address that cannot be bound stops Run with the address named.
TEST_F(LifecycleTest, RunFailsNamingAnAddressItCannotListenOn) {
  TempDir dir;
  Settings settings = ServerSettings(dir.WriteFile("limits.yaml", kConfig));
  settings.grpc.address = "192.0.2.1:1";  // TEST-NET-1: no interface of this host has it
  auto parts = Assembly::Create(settings, nullptr);
  ASSERT_TRUE(parts.ok()) << parts.status();
  const absl::Status run = Lifecycle(**parts, settings).Run();
  EXPECT_EQ(run.message(), "cannot listen on gRPC address 192.0.2.1:1");
}

}  // namespace
}  // namespace sluice
