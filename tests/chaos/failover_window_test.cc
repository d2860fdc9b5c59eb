// Failover window test: how long after Redis itself reports a new master do Sluice replicas keep
// answering by their failure policy? Two Sluice replicas share a Redis Cluster (3 masters, 3
// replicas) or a Sentinel-managed master with 3 sentinels: one is busy through the whole run,
// the other is idle from just before the fault until Redis reports the new master, and is then
// asked at the same pace. A master is killed (SIGKILL) or, under Sentinel, also failed over
// without a crash (SENTINEL FAILOVER).
//
// "Redis reports the new master" (T0) is the moment the test's own poll (every 20 ms) first sees
// it: for the cluster, every live node says cluster_state:ok and all agree that a live master
// serves every slot (RedisCluster::WaitForPromotion); for Sentinel, every sentinel's
// get-master-addr-by-name names the replica and it answers ROLE master (WaitForFailover).
//
// The domain's failure_mode is deny and its limit is far above what the test sends, each
// request naming fresh keys: an OVER_LIMIT answer is a failure-policy answer and nothing else.
// The window of a replica is from T0 to its last failure-policy answer (0 if none came after
// T0). The test fails when a window exceeds 2 s (the goal is 0.5 s; the margin is for a loaded
// 2-core machine), less the time the host did not run the test within it (host_stalls.h), or
// when a request fails with a gRPC error; and unless the busy replica's /metrics counted the move
// (sluice_redis_topology_changes_total) and, when the master died, the end of its failure window
// (sluice_redis_node_failure_window_seconds). It prints one row per run;
// docs/failure-handling.md has the figures.
//
// The replicas run with --redis_timeout=100ms, not the 10 ms default: the window is the time to
// follow the topology, and a master that answers late is the budget's business, not the
// failover's. On 2 cores the new master does answer late now and then: about 2 s after SENTINEL
// FAILOVER the sentinels demote the old master, which asks the new one for a full resync, and
// the new master's fork for it kept a request past 10 ms in 4 runs of 10 (one failure-mode
// answer on both replicas at once, "no reply before the deadline", a 2.1 s window).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/rls_client.h"
#include "gtest/gtest.h"
#include "tests/support/host_stalls.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_sentinel.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using testing::HostStallProbe;
using testing::HostStalls;
using testing::RedisCluster;
using testing::RedisSentinelDeployment;
using testing::SluiceServer;
using testing::TempDir;

constexpr char kConfig[] = R"(domain: failover
failure_mode: deny
descriptors:
  - key: key
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
)";

// Each replica is asked every kPeriod for kDescriptors fresh keys (a cluster's three masters all
// hold some of them).
constexpr absl::Duration kPeriod = absl::Milliseconds(5);
constexpr int kDescriptors = 4;
// How long the run goes on after T0: longer than any window the test accepts.
constexpr absl::Duration kAfter = absl::Seconds(3);
constexpr absl::Duration kMostWindow = absl::Seconds(2);

using Clock = std::chrono::steady_clock;

// One replica's load: a request of fresh keys every kPeriod while active.
class Driver {
 public:
  Driver(const std::string& address, int id) : client_(address), id_(id) {}
  ~Driver() { Stop(); }

  void Start(Clock::time_point origin) {
    origin_ = origin;
    thread_ = std::thread([this] { Run(); });
  }
  void set_active(bool active) { active_.store(active); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  struct Answer {
    absl::Duration at;  // since the origin
    bool policy = false;
  };
  std::vector<Answer> answers() const {
    absl::MutexLock lock(&mu_);
    return answers_;
  }
  int errors() const { return errors_.load(); }
  std::string last_error() const {
    absl::MutexLock lock(&mu_);
    return last_error_;
  }

 private:
  absl::Duration Since() const {
    return absl::FromChrono(Clock::now() - origin_);
  }

  void Run() {
    uint64_t next_key = 0;
    auto next = Clock::now();
    while (!stop_.load()) {
      next += absl::ToChronoMicroseconds(kPeriod);
      std::this_thread::sleep_until(next);
      if (!active_.load()) continue;
      std::vector<std::string> descriptors;
      for (int d = 0; d < kDescriptors; ++d) {
        descriptors.push_back(absl::StrCat("key=r", id_, "-", next_key++));
      }
      absl::StatusOr<RlsRequest> request = BuildRequest("failover", descriptors, 0);
      if (!request.ok()) {
        ++errors_;
        continue;
      }
      absl::StatusOr<RlsResponse> response = client_.ShouldRateLimit(*request, absl::Seconds(2));
      const absl::Duration at = Since();
      absl::MutexLock lock(&mu_);
      if (!response.ok()) {
        ++errors_;
        last_error_ = response.status().ToString();
        continue;
      }
      answers_.push_back(
          {at, response->overall_code() == envoy::service::ratelimit::v3::RateLimitResponse::OVER_LIMIT});
      if (next < Clock::now() - std::chrono::milliseconds(100)) next = Clock::now();
    }
  }

  RlsClient client_;
  const int id_;
  Clock::time_point origin_;
  std::thread thread_;
  std::atomic<bool> active_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> errors_{0};
  mutable absl::Mutex mu_;
  std::vector<Answer> answers_;
  std::string last_error_;
};

// What a replica saw around a failover.
struct Window {
  absl::Duration window;          // T0 to the last policy answer (0 if none after T0)
  absl::Duration judged;          // less the host's stalls inside it
  int policy_before = 0;          // policy answers between the fault and T0
  int policy_after = 0;           // after T0
  int decided_after = 0;          // answers after T0
};

Window Measure(const std::vector<Driver::Answer>& answers, absl::Duration fault,
               absl::Duration t0, const HostStalls& stalls, absl::Duration probe_offset) {
  Window w;
  absl::Duration last = t0;
  for (const Driver::Answer& a : answers) {
    if (a.at >= t0) ++w.decided_after;
    if (!a.policy) continue;
    if (a.at < fault) continue;
    if (a.at < t0) {
      ++w.policy_before;
    } else {
      ++w.policy_after;
      last = std::max(last, a.at);
    }
  }
  w.window = last - t0;
  // Stalls are offsets from the probe's start; answers from the drivers' origin.
  absl::Duration stalled;
  for (const auto& [from, to] : stalls.intervals()) {
    absl::Duration a = std::max(from + probe_offset, t0);
    absl::Duration b = std::min(to + probe_offset, last);
    if (b > a) stalled += b - a;
  }
  w.judged = w.window - stalled;
  return w;
}

class FailoverWindowTest : public ::testing::Test {
 protected:
  void StartSluice(const std::vector<std::string>& backend_flags) {
    const std::string config = dir_.WriteFile("failover.yaml", kConfig);
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> flags = backend_flags;
      flags.push_back("--redis_timeout=100ms");
      auto server = SluiceServer::Start(config, flags, dir_.path());
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
  }

  // Runs the load, calls `fault` (which fails a master and returns once Redis reports its
  // successor), and judges both replicas' windows.
  // `node_dies`: the fault kills the master, whose failure window must then be counted.
  void Run(const std::string& name, const std::function<void()>& fault, bool node_dies = true) {
    const Clock::time_point origin = Clock::now();
    auto since = [&] { return absl::FromChrono(Clock::now() - origin); };
    Driver busy(servers_[0]->grpc_address(), 0);
    Driver idle(servers_[1]->grpc_address(), 1);
    busy.Start(origin);
    idle.Start(origin);
    busy.set_active(true);
    idle.set_active(true);
    // Both replicas have decided on every master before the fault.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    idle.set_active(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    HostStallProbe probe(absl::Milliseconds(5));
    const absl::Duration probe_offset = since();
    const absl::Duration fault_at = since();
    fault();
    const absl::Duration t0 = since();
    idle.set_active(true);
    std::this_thread::sleep_for(absl::ToChronoMicroseconds(kAfter));
    busy.Stop();
    idle.Stop();
    const HostStalls stalls = probe.Stop();
    if (::testing::Test::HasFatalFailure()) return;

    const Window w_busy = Measure(busy.answers(), fault_at, t0, stalls, probe_offset);
    const Window w_idle = Measure(idle.answers(), fault_at, t0, stalls, probe_offset);
    std::printf("%-34s fault->report %6.0f ms | busy: window %5.0f ms (judged %5.0f), policy "
                "%d before, %d after of %d | idle: window %5.0f ms (judged %5.0f), policy %d "
                "after of %d | host stalls %s\n",
                name.c_str(), absl::ToDoubleMilliseconds(t0 - fault_at),
                absl::ToDoubleMilliseconds(w_busy.window), absl::ToDoubleMilliseconds(w_busy.judged),
                w_busy.policy_before, w_busy.policy_after, w_busy.decided_after,
                absl::ToDoubleMilliseconds(w_idle.window), absl::ToDoubleMilliseconds(w_idle.judged),
                w_idle.policy_after, w_idle.decided_after, stalls.Describe().c_str());
    std::fflush(stdout);
    EXPECT_EQ(busy.errors(), 0) << busy.last_error();
    EXPECT_EQ(idle.errors(), 0) << idle.last_error();
    // The load ran on both sides of T0, and the fault was seen by the busy replica.
    EXPECT_GT(w_busy.decided_after, 100);
    EXPECT_GT(w_idle.decided_after, 100);
    EXPECT_LE(w_busy.judged, kMostWindow) << name << ": busy replica";
    EXPECT_LE(w_idle.judged, kMostWindow) << name << ": idle replica";

    // What an operator sees: the move, and the failed master's failure window, ended.
    const std::string page = testing::HttpGet(servers_[0]->http_port(), "/metrics");
    EXPECT_GT(testing::MetricValue(page, "sluice_redis_topology_changes_total"), changes_seen_)
        << name << ": no topology change counted\n" << page;
    changes_seen_ = testing::MetricValue(page, "sluice_redis_topology_changes_total");
    if (node_dies) {
      EXPECT_GT(testing::MetricSum(page, "sluice_redis_node_failure_window_seconds_count{"),
                windows_seen_)
          << name << ": no failure window ended\n" << page;
    }
    windows_seen_ = testing::MetricSum(page, "sluice_redis_node_failure_window_seconds_count{");
  }

  double changes_seen_ = 0;
  double windows_seen_ = 0;

  TempDir dir_;
  std::vector<std::unique_ptr<SluiceServer>> servers_;
};

// A master is killed and its replica promoted; then the dead node comes back (as a replica of
// its successor) and is promoted again when the successor dies: Sluice knew it as a master
// before, and its client for it spent the time it was down reconnecting with backoff.
TEST_F(FailoverWindowTest, ClusterKillThenFailback) {
  auto started = RedisCluster::Start({.node_timeout_ms = 2000});
  ASSERT_TRUE(started.ok()) << started.status();
  RedisCluster& cluster = **started;
  StartSluice({"--backend=redis_cluster",
               "--redis_addresses=" + absl::StrJoin(cluster.SeedAddresses(), ",")});
  if (HasFatalFailure()) return;
  std::string successor;
  std::string first_dead;
  Run("cluster, master killed", [&] {
    auto killed = cluster.KillMaster(1);
    ASSERT_TRUE(killed.ok()) << killed.status();
    auto promoted = cluster.WaitForPromotion(*killed, std::chrono::seconds(30));
    ASSERT_TRUE(promoted.ok()) << promoted.status();
    successor = *promoted;
    first_dead = *killed;
  });
  if (HasFatalFailure()) return;
  ASSERT_TRUE(cluster.ServerAt(first_dead)->Restart().ok());
  ASSERT_TRUE(cluster.WaitUntilHealthy(std::chrono::seconds(30)).ok());
  Run("cluster, failback", [&] {
    ASSERT_TRUE(cluster.KillNode(successor).ok());
    auto promoted = cluster.WaitForPromotion(successor, std::chrono::seconds(30));
    ASSERT_TRUE(promoted.ok()) << promoted.status();
  });
}

class SentinelFailoverWindowTest : public FailoverWindowTest {
 protected:
  void SetUp() override {
    auto started = RedisSentinelDeployment::Start({});
    ASSERT_TRUE(started.ok()) << started.status();
    deployment_ = std::move(*started);
    StartSluice({"--backend=redis",
                 "--redis_sentinels=" + absl::StrJoin(deployment_->SentinelAddresses(), ","),
                 "--redis_sentinel_master=" + deployment_->master_name()});
  }
  std::unique_ptr<RedisSentinelDeployment> deployment_;
};

TEST_F(SentinelFailoverWindowTest, MasterKilled) {
  if (HasFatalFailure()) return;
  Run("sentinel, master killed", [&] {
    deployment_->KillMaster();
    ASSERT_TRUE(deployment_->WaitForFailover(std::chrono::seconds(30)).ok());
  });
}

TEST_F(SentinelFailoverWindowTest, ForcedFailover) {
  if (HasFatalFailure()) return;
  Run("sentinel, SENTINEL FAILOVER", [&] {
    ASSERT_TRUE(deployment_->ForceFailover(std::chrono::seconds(30)).ok());
  }, /*node_dies=*/false);
}

}  // namespace
}  // namespace sluice
