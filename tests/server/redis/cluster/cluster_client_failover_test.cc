// The cluster client through a master failure: its own cluster, since a killed master is gone
// for good. Plain, and over TLS (every node, the cluster bus and replication), where the client
// learns the nodes' TLS ports from CLUSTER SLOTS and checks each node's certificate.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/common/clock.h"
#include "server/redis/cluster/cluster_client.h"
#include "server/redis/cluster/hash_slot.h"
#include "tests/server/redis/cluster/cluster_test_helpers.h"
#include "tests/support/certificates.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"

namespace sluice {
namespace {

using cluster_test::BatchResult;
using cluster_test::NowUs;
using cluster_test::RunOne;
using cluster_test::SlotOwners;
using cluster_test::TagsOn;
using cluster_test::Traffic;
using testing::RedisCluster;

constexpr absl::Duration kBudget = absl::Milliseconds(300);

// Verifies that killing a master under load crashes nothing and hangs nothing: batches in the
// gap fail fast with kUnavailable or kDeadlineExceeded within their budget, every callback runs
// once, and once the cluster has promoted the replica, batches succeed again within a few
// seconds, routed to the new master.
class ClusterClientFailoverTest : public ::testing::TestWithParam<bool> {};

TEST_P(ClusterClientFailoverTest, KilledMasterIsReplacedByItsReplicaWithinSeconds) {
  const bool tls = GetParam();
  testing::TempDir certificates;
  testing::RedisClusterOptions cluster_options{.node_timeout_ms = 1000};
  RedisClientOptions node{.io_threads = 2,
                          .connect_timeout = absl::Milliseconds(500),
                          .backoff_max = absl::Milliseconds(500)};
  if (tls) {
    ASSERT_TRUE(testing::MakeCa(certificates.path(), "ca").ok());
    ASSERT_TRUE(testing::MakeCert(certificates.path(), "node", "ca").ok());
    cluster_options.tls.enabled = true;
    cluster_options.tls.cert_file = certificates.path() + "/node.crt";
    cluster_options.tls.key_file = certificates.path() + "/node.key";
    cluster_options.tls.ca_file = certificates.path() + "/ca.crt";
    node.tls.enabled = true;
    node.tls.ca_file = certificates.path() + "/ca.crt";
  }
  absl::StatusOr<std::unique_ptr<RedisCluster>> started = RedisCluster::Start(cluster_options);
  ASSERT_TRUE(started.ok()) << started.status();
  RedisCluster& cluster = **started;
  absl::StatusOr<std::unique_ptr<RedisClusterClient>> created = RedisClusterClient::Create(
      {.seeds = tls ? cluster.TlsSeedAddresses() : cluster.SeedAddresses(), .node = node},
      RealClock::Get());
  ASSERT_TRUE(created.ok()) << created.status();
  RedisClusterClient& client = **created;
  ASSERT_TRUE(client.WaitUntilReady(absl::Seconds(20)));

  absl::StatusOr<std::vector<std::string>> masters = cluster.Masters();
  ASSERT_TRUE(masters.ok()) << masters.status();
  ASSERT_EQ(masters->size(), 3u);
  std::vector<std::string> owners = SlotOwners(cluster);
  std::vector<std::string> keys;
  for (const std::string& master : *masters) {
    for (const std::string& tag : TagsOn(owners, master, "failover", 2)) {
      keys.push_back(absl::StrCat("fo:{", tag, "}"));
    }
  }
  const std::string victim = (*masters)[0];
  const std::string victim_key = keys[0];

  Traffic traffic(client, 2, kBudget, [&](int, int64_t) {
    CommandBatch batch;
    for (const std::string& key : keys) {
      batch.Add({"INCR", key});
    }
    return batch;
  });
  ASSERT_TRUE(traffic.WaitForMore(50, absl::Seconds(20), /*successes_only=*/true));

  int64_t killed_us = NowUs();
  ASSERT_TRUE(cluster.KillNode(victim).ok());
  absl::StatusOr<std::string> promoted = cluster.WaitForPromotion(victim, std::chrono::seconds(30));
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  int64_t promoted_us = NowUs();
  ASSERT_TRUE(traffic.WaitForMore(20, absl::Seconds(10), /*successes_only=*/true))
      << "no recovery within 10 s of the promotion";
  traffic.Stop();

  EXPECT_EQ(traffic.hung(), 0);
  int failures = 0;
  int64_t first_success_after_promotion_us = -1;
  int64_t slowest_failure_us = 0;
  for (const Traffic::Outcome& outcome : traffic.outcomes()) {
    const BatchResult& result = outcome.result;
    ASSERT_EQ(result.calls, 1);
    int64_t took_us = result.completed_us - result.started_us;
    if (result.code == absl::StatusCode::kOk) {
      ASSERT_EQ(result.replies.size(), keys.size());
      if (result.started_us >= promoted_us &&
          (first_success_after_promotion_us < 0 ||
           result.completed_us < first_success_after_promotion_us)) {
        first_success_after_promotion_us = result.completed_us;
      }
      continue;
    }
    ++failures;
    slowest_failure_us = std::max(slowest_failure_us, took_us);
    EXPECT_TRUE(result.code == absl::StatusCode::kUnavailable ||
                result.code == absl::StatusCode::kDeadlineExceeded)
        << result.status();
    EXPECT_GE(result.started_us, killed_us - absl::ToInt64Microseconds(kBudget))
        << "a failure before the kill: " << result.status();
  }
  EXPECT_GT(failures, 0) << "the gap between kill and promotion produced no failure at all";
  // Fail fast: never much past the budget (slack for loaded CI machines and sanitizers).
  EXPECT_LE(slowest_failure_us, absl::ToInt64Microseconds(kBudget) + 700000);
  ASSERT_GE(first_success_after_promotion_us, 0);
  EXPECT_LE(first_success_after_promotion_us - promoted_us, 5000000)
      << "recovery took too long after the promotion";

  // The dead master's slots now route to the promoted replica.
  BatchResult after = RunOne(client, {"INCR", victim_key});
  ASSERT_TRUE(after.code == absl::StatusCode::kOk) << after.status();
  std::shared_ptr<const SlotMap> map = client.slot_map();
  int owner = map->NodeForSlot(HashSlot(victim_key));
  ASSERT_GE(owner, 0);
  // (The cluster helper names nodes by their plain addresses; the client knows the TLS ones.)
  EXPECT_EQ(map->nodes()[static_cast<size_t>(owner)].address,
            tls ? cluster.TlsAddressOf(*promoted) : *promoted);
  RedisClusterClientStats stats = client.stats();
  EXPECT_GT(stats.node_failures + stats.cluster_down, 0u);
  EXPECT_GE(stats.refreshes, 2u);
  if (tls) {
    // Every node the client met was checked, and none refused.
    EXPECT_EQ(stats.connections.tls_failures, 0u);
  }
  std::printf(
      "%sfailover: %d failed batches, slowest failure %lld ms, recovered %lld ms after "
      "promotion, promotion %lld ms after the kill\n",
      tls ? "TLS " : "", failures, static_cast<long long>(slowest_failure_us / 1000),
      static_cast<long long>((first_success_after_promotion_us - promoted_us) / 1000),
      static_cast<long long>((promoted_us - killed_us) / 1000));
  client.Stop();
}

// Verifies a client with no traffic at all follows a failover by itself: while a master is down
// it re-reads the topology a few times a second (no more), the promoted replica serves the dead
// master's slots in its map soon after the cluster reports it (2 s at most here, a margin for a
// loaded machine: bench and docs/failure-handling.md have the figures), and once every master
// of the map is reachable it stops asking.
TEST(ClusterClientIdleFailoverTest, IdleClientFollowsTheFailoverThenStopsAsking) {
  absl::StatusOr<std::unique_ptr<RedisCluster>> started =
      RedisCluster::Start({.node_timeout_ms = 1000});
  ASSERT_TRUE(started.ok()) << started.status();
  RedisCluster& cluster = **started;
  absl::StatusOr<std::unique_ptr<RedisClusterClient>> created = RedisClusterClient::Create(
      {.seeds = cluster.SeedAddresses(), .node = {.connect_timeout = absl::Milliseconds(500)}},
      RealClock::Get());
  ASSERT_TRUE(created.ok()) << created.status();
  RedisClusterClient& client = **created;
  ASSERT_TRUE(client.WaitUntilReady(absl::Seconds(20)));
  absl::StatusOr<std::vector<std::string>> masters = cluster.Masters();
  ASSERT_TRUE(masters.ok()) << masters.status();
  const std::string victim = (*masters)[1];
  const std::vector<std::string> owners = SlotOwners(cluster);
  const int slot = static_cast<int>(std::find(owners.begin(), owners.end(), victim) -
                                    owners.begin());
  ASSERT_LT(slot, static_cast<int>(owners.size()));
  auto asked = [&client] {
    RedisClusterClientStats stats = client.stats();
    return stats.refreshes + stats.refresh_failures;
  };
  auto owner_now = [&client, slot] {
    std::shared_ptr<const SlotMap> map = client.slot_map();
    int node = map->NodeForSlot(slot);
    return node < 0 ? std::string() : map->nodes()[static_cast<size_t>(node)].address;
  };
  // Quiet before the fault: nothing asks. Measured once the start has settled: a pool
  // connection still connecting after WaitUntilReady (seen under ASan) is trouble for up to a
  // second, and may draw a refresh, as it should.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const uint64_t quiet_before = asked();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(asked(), quiet_before) << "refreshes while every node was up";

  const int64_t killed_us = NowUs();
  const uint64_t asked_at_kill = asked();
  ASSERT_TRUE(cluster.KillNode(victim).ok());
  absl::StatusOr<std::string> promoted = cluster.WaitForPromotion(victim, std::chrono::seconds(30));
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  const int64_t reported_us = NowUs();
  while (owner_now() != *promoted && NowUs() - reported_us < 5000000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int64_t seen_us = NowUs();
  ASSERT_EQ(owner_now(), *promoted) << "the idle client's map still routes to " << owner_now();
  const uint64_t asked_during = asked() - asked_at_kill;
  const double seconds = static_cast<double>(seen_us - killed_us) / 1e6;
  std::printf("idle client: new master in its map %lld ms after the cluster reported it; "
              "%llu refreshes in the %.1f s of the outage\n",
              static_cast<long long>((seen_us - reported_us) / 1000),
              static_cast<unsigned long long>(asked_during), seconds);
  EXPECT_LE(seen_us - reported_us, 2000000);
  // Every 150-250 ms (the default outage interval, jittered), and a first one at once.
  EXPECT_GE(static_cast<double>(asked_during), seconds * 2);
  EXPECT_LE(static_cast<double>(asked_during), seconds / 0.15 + 2);

  // Healed (the dead node is no longer in the map): after the trouble is a second old, quiet.
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  const uint64_t quiet_after = asked();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(asked(), quiet_after) << "refreshes after the cluster healed";
  EXPECT_GE(client.stats().topology_changes, 1u);
  client.Stop();
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, ClusterClientFailoverTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Tls") : std::string("Plain");
                         });

}  // namespace
}  // namespace sluice
