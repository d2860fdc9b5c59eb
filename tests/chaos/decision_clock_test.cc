// Decision clock test: after Redis is paused (SIGSTOP) for 2 s, then killed and started again
// under load, a token bucket and a GCRA of 100/s with a burst of 50 each admit what they owe in
// the 2 s after the restart: the restarted Redis is empty, so each starts full (50) and refills
// 100/s, 250 in all, less at most 5 for the load's own edges (its first call lands a few
// milliseconds into the interval), and at most 275 (its last calls decided a little late). A
// decision clock that jumped forward would admit more; one that lost time, fewer. One Sluice
// replica at 1,000 requests/s on each rule (one key each; 300/s under sanitizers), failure_mode
// deny, the default budget (10 ms); five runs of the fault in a row. Each run prints Redis'
// clock offset before the restart and after the interval.
//
// A decision the failure policy answers in the interval (the breaker still open for a few tens
// of milliseconds after the restart, until the client has its connection back) is a denial that
// was never the bucket's: the least a run must admit shrinks by them, so that the clock is
// judged and nothing else. They are printed by reason.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/load_generator.h"
#include "gtest/gtest.h"
#include "tests/chaos/chaos_support.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using chaos::PolicyCounters;
using chaos::ScrapePolicy;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;

constexpr char kConfig[] = R"(domain: clock
failure_mode: deny
descriptors:
  - key: tb
    rate_limit:
      algorithm: token_bucket
      unit: second
      requests_per_unit: 100
      burst: 50
  - key: gcra
    rate_limit:
      algorithm: gcra
      unit: second
      requests_per_unit: 100
      burst: 50
)";
// Ten times the rule's rate (three times under sanitizers, which slow everything several times and
// share the machine with the rest of the suite).
constexpr double kRatePerRule = chaos::kSanitized ? 300 : 1000;
constexpr absl::Duration kMeasured = absl::Seconds(2);
constexpr int kRuns = 5;
// 50 + 100/s x 2 s.
constexpr uint64_t kDue = 250;
// The most a run may admit: the interval's last calls are decided up to a budget or a stalled
// moment later, when the bucket has refilled a little more (as chaos_test's bound, 250 ms of
// it: a sanitized build under the suite's load decided some 80 ms late and admitted 258).
constexpr uint64_t kMost = 275;
// What the load's edges may cost: its first call lands a few milliseconds into the interval and
// its last one a few before the end (open loop at 1,000/s: a call a millisecond).
constexpr uint64_t kEdges = 5;

// Load on both rules at once for `duration`, `during` running meanwhile; the admitted of each.
struct Admitted {
  uint64_t tb = 0;
  uint64_t gcra = 0;
  uint64_t errors = 0;
};

Admitted Load(const SluiceServer& server, int run, absl::Duration duration,
              const std::function<void()>& during = {}) {
  absl::StatusOr<LoadResult> results[2] = {absl::UnknownError("not run"),
                                           absl::UnknownError("not run")};
  std::vector<std::thread> threads;
  const char* keys[2] = {"tb", "gcra"};
  for (int i = 0; i < 2; ++i) {
    LoadOptions options = chaos::OpenLoopOptions("clock", 1, 1, duration);
    options.key = keys[i];
    options.server = server.grpc_address();
    options.rate = kRatePerRule;
    options.seed = static_cast<uint64_t>(run) * 10 + i + 1;
    threads.emplace_back([&results, i, options] { results[i] = RunLoad(options); });
  }
  if (during) during();
  for (auto& thread : threads) thread.join();
  Admitted admitted;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(results[i].ok()) << results[i].status();
    if (!results[i].ok()) continue;
    (i == 0 ? admitted.tb : admitted.gcra) = results[i]->descriptor_ok;
    admitted.errors += results[i]->errors();
  }
  return admitted;
}

TEST(DecisionClockTest, PausedThenKilledAndRestartedRedisOwesEveryToken) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  TempDir dir;
  const std::string config = dir.WriteFile("clock.yaml", kConfig);
  auto server = SluiceServer::Start(
      config, {"--backend=redis", "--redis_addresses=" + (*redis)->address()}, dir.path());
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::unique_ptr<SluiceServer>> servers;
  servers.push_back(std::move(*server));
  const SluiceServer& sluice = *servers.front();

  std::printf("%-4s %-10s %-10s %-8s %-22s %s\n", "run", "tb", "gcra", "policy",
              "offset us before/after", "policy by reason");
  for (int run = 0; run < kRuns; ++run) {
    // Steady, then the fault under load: paused 2 s, then killed.
    Load(sluice, run, absl::Seconds(1));
    Load(sluice, run, absl::Milliseconds(2500), [&] {
      absl::SleepFor(absl::Milliseconds(500));
      (*redis)->Pause();
      absl::SleepFor(absl::Seconds(2));
      (*redis)->Kill();
    });
    const double offset_before = testing::MetricValue(
        testing::HttpGet(sluice.http_port(), "/metrics"), "sluice_redis_clock_offset_microseconds");
    ASSERT_TRUE((*redis)->Restart().ok());
    const PolicyCounters before = ScrapePolicy(servers);
    // The restarted Redis holds nothing: each bucket starts full at the interval's first call.
    const Admitted measured = Load(sluice, run, kMeasured);
    const PolicyCounters policy = ScrapePolicy(servers).Minus(before);
    const double offset_after = testing::MetricValue(
        testing::HttpGet(sluice.http_port(), "/metrics"), "sluice_redis_clock_offset_microseconds");
    std::printf("%-4d %3llu/%-6llu %3llu/%-6llu %-8.0f %10.0f/%-11.0f %s\n", run,
                static_cast<unsigned long long>(measured.tb),
                static_cast<unsigned long long>(kDue),
                static_cast<unsigned long long>(measured.gcra),
                static_cast<unsigned long long>(kDue), policy.policy_decisions, offset_before,
                offset_after, policy.Reasons().c_str());
    std::fflush(stdout);
    EXPECT_EQ(measured.errors, 0u);
    const uint64_t policy_answers = static_cast<uint64_t>(policy.policy_decisions);
    const uint64_t least = kDue - kEdges - std::min<uint64_t>(policy_answers, kDue - kEdges);
    EXPECT_GE(measured.tb, least) << "run " << run << ": token bucket";
    EXPECT_LE(measured.tb, kMost) << "run " << run << ": token bucket";
    EXPECT_GE(measured.gcra, least) << "run " << run << ": GCRA";
    EXPECT_LE(measured.gcra, kMost) << "run " << run << ": GCRA";
  }
}

}  // namespace
}  // namespace sluice
