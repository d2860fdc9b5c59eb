// Network faults with real latency and loss: Redis runs in its own network namespace, reached
// over a veth pair through the kernel's IP stack, and nftables rules there delay its packets
// (through sluice-netdelay) or drop them at random. The test machines' kernels have no
// sch_netem, so `tc ... netem` itself cannot be used; the packets are delayed and lost all the
// same, and TCP sees it (slow round trips, retransmissions).
//
// What it proves:
// - one round trip per request: a 5 ms delay adds about 5 ms to a request of one descriptor
//   and about the same to a request of five (their checks are pipelined, not sent one by one);
// - a network slower than the budget is answered by the failure policy within the budget, with
//   no error and no stall, and Redis decides again once the network is fast;
// - the same for a lossy network (retransmissions take longer than any budget).
//
// Needs root (network namespaces, iptables); skipped otherwise.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rls_client.h"
#include "gtest/gtest.h"
#include "tests/chaos/chaos_support.h"
#include "tests/support/net_namespace.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/sanitizers.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using chaos::LoadSummary;
using chaos::OpenLoopOptions;
using chaos::ExpectNoStall;
using chaos::ExpectRecovered;
using chaos::PolicyCounters;
using chaos::RunOpenLoop;
using chaos::ScrapePolicy;
using testing::NetNamespace;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;

// High limits: every check is decided by Redis and admitted, so latency is Redis' round trip.
constexpr char kConfig[] = R"(domain: net
failure_mode: allow
descriptors:
  - key: key
    rate_limit:
      algorithm: token_bucket
      unit: second
      requests_per_unit: 1000000
  - key: key1
    rate_limit:
      algorithm: sliding_window_log
      unit: second
      requests_per_unit: 1000000
  - key: key2
    rate_limit:
      algorithm: gcra
      unit: second
      requests_per_unit: 1000000
  - key: key3
    rate_limit:
      unit: second
      requests_per_unit: 1000000
  - key: key4
    rate_limit:
      algorithm: leaky_bucket
      unit: second
      requests_per_unit: 1000000
)";

class NetworkFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "network namespaces and iptables need root";
    }
    auto ns = NetNamespace::Create();
    ASSERT_TRUE(ns.ok()) << ns.status();
    ns_ = std::move(*ns);
    // Protected mode refuses clients from outside loopback without a password.
    auto redis = RedisServer::Start({.extra_config = {"protected-mode no"},
                                     .host = ns_->inner_address(),
                                     .launcher = ns_->ExecPrefix()});
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
  }

  void TearDown() override {
    servers_.clear();
    redis_.reset();
    ns_.reset();
  }

  void StartSluice(absl::Duration budget) {
    std::string config = dir_.WriteFile("net.yaml", kConfig);
    auto server = SluiceServer::Start(
        config,
        {"--backend=redis", "--redis_addresses=" + redis_->address(),
         absl::StrCat("--redis_timeout=", absl::FormatDuration(budget))},
        dir_.path());
    ASSERT_TRUE(server.ok()) << server.status();
    servers_.push_back(std::move(*server));
  }

  // The median latency of `count` requests sent one after another, each of `descriptors`
  // descriptors (key=v, key1=v, ...: each its own rule and Redis key).
  absl::Duration MedianLatency(int descriptors, int count) {
    std::vector<std::string> entries;
    for (int i = 0; i < descriptors; ++i) {
      entries.push_back(absl::StrCat(i == 0 ? "key" : absl::StrCat("key", i), "=v"));
    }
    auto request = BuildRequest("net", entries, 0);
    EXPECT_TRUE(request.ok()) << request.status();
    RlsClient client(servers_.front()->grpc_address());
    // One untimed call: the channel connects and the scripts load.
    EXPECT_TRUE(client.ShouldRateLimit(*request, absl::Seconds(5)).ok());
    std::vector<absl::Duration> latencies;
    for (int i = 0; i < count; ++i) {
      const absl::Time start = absl::Now();
      auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
      latencies.push_back(absl::Now() - start);
      EXPECT_TRUE(response.ok()) << response.status();
      if (!response.ok()) break;
      EXPECT_EQ(response->overall_code(), RlsResponse::OK);
    }
    std::sort(latencies.begin(), latencies.end());
    return latencies.empty() ? absl::InfiniteDuration() : latencies[latencies.size() / 2];
  }

  // A fault under open-loop load, then the network healed: the fault's decisions all come back
  // within the budget, from the policy when Redis cannot answer in time; once healed and the
  // circuit breaker's cool-down (1 s) is over, Redis decides everything again.
  void ExpectAnsweredWithinBudgetThenHealed(const std::string& what, absl::Duration delay,
                                            double loss);

  TempDir dir_;
  std::unique_ptr<NetNamespace> ns_;
  std::unique_ptr<RedisServer> redis_;
  std::vector<std::unique_ptr<SluiceServer>> servers_;
};

TEST_F(NetworkFaultTest, OneRoundTripPerRequestWhateverItsDescriptors) {
  // A budget well above the delay: every check is decided by Redis.
  StartSluice(absl::Milliseconds(200));
  constexpr int kRequests = 200;
  const absl::Duration one_fast = MedianLatency(1, kRequests);
  const absl::Duration five_fast = MedianLatency(5, kRequests);
  absl::Status faults = ns_->SetFaults(absl::Milliseconds(5), 0);
  ASSERT_TRUE(faults.ok()) << faults;
  const absl::Duration one_slow = MedianLatency(1, kRequests);
  const absl::Duration five_slow = MedianLatency(5, kRequests);
  ASSERT_TRUE(ns_->SetFaults(absl::ZeroDuration(), 0).ok());

  const absl::Duration added_one = one_slow - one_fast;
  const absl::Duration added_five = five_slow - five_fast;
  std::printf(
      "median latency, 5 ms added to each packet into Redis' namespace:\n"
      "  1 descriptor:  %s -> %s (+%s)\n  5 descriptors: %s -> %s (+%s)\n",
      absl::FormatDuration(one_fast).c_str(), absl::FormatDuration(one_slow).c_str(),
      absl::FormatDuration(added_one).c_str(), absl::FormatDuration(five_fast).c_str(),
      absl::FormatDuration(five_slow).c_str(), absl::FormatDuration(added_five).c_str());
  // The delay is real and paid once: a second round trip would add another 5 ms, one per
  // descriptor would add 25.
  EXPECT_GE(added_one, absl::Milliseconds(4));
  EXPECT_LT(added_one, absl::Milliseconds(9));
  EXPECT_GE(added_five, absl::Milliseconds(4));
  EXPECT_LT(added_five, absl::Milliseconds(9));
  // No decision fell to the policy.
  EXPECT_EQ(ScrapePolicy(servers_).policy_decisions, 0);
}

void NetworkFaultTest::ExpectAnsweredWithinBudgetThenHealed(const std::string& what,
                                                            absl::Duration delay, double loss) {
  const absl::Duration budget = absl::Milliseconds(10);
  StartSluice(budget);
  if (HasFatalFailure()) return;
  const double rate = 300;
  const LoadOptions options = OpenLoopOptions("net", 50, 1, absl::Seconds(3));

  // The machine's own latency with the network healthy: the reference the bounds below add to
  // (a loaded CI machine is several milliseconds slower at p99 than a quiet one; waiting for TCP
  // to retransmit is hundreds either way).
  const LoadSummary reference = RunOpenLoop(servers_, options, rate, 3);
  const double reference_p99_ms = reference.QuantileMsOfUnexposed(0.99, budget);
  const double reference_max_ms = reference.QuantileMsOfUnexposed(1.0, budget);

  const PolicyCounters before = ScrapePolicy(servers_);
  absl::Status faults = ns_->SetFaults(delay, loss);
  ASSERT_TRUE(faults.ok()) << faults;
  const LoadSummary faulty = RunOpenLoop(servers_, options, rate, 1);
  const PolicyCounters during = ScrapePolicy(servers_).Minus(before);
  ASSERT_TRUE(ns_->SetFaults(absl::ZeroDuration(), 0).ok());

  // The breaker's cool-down, then one probe; TCP's retransmission timers may still be backed
  // off, and a stalled connection is replaced: give it a little longer.
  absl::SleepFor(absl::Seconds(2));
  const PolicyCounters healed_before = ScrapePolicy(servers_);
  const LoadSummary healed = RunOpenLoop(servers_, options, rate, 2);
  const PolicyCounters after = ScrapePolicy(servers_).Minus(healed_before);

  std::printf("%-22s reference p99 %.2f max %.2f ms\n", what.c_str(), reference_p99_ms,
              reference_max_ms);
  std::printf("%-22s latency p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f max %.2f ms\n", what.c_str(),
              faulty.latency.ValueAtQuantile(0.5) / 1e6, faulty.latency.ValueAtQuantile(0.9) / 1e6,
              faulty.latency.ValueAtQuantile(0.99) / 1e6,
              faulty.latency.ValueAtQuantile(0.999) / 1e6, faulty.latency.max() / 1e6);
  for (const auto& [name, run, policy] :
       {std::tuple(what, &faulty, &during), std::tuple(std::string("  healed"), &healed, &after)}) {
    std::printf("%-22s decisions %llu, errors %llu, unsent %llu, p99 %.2f ms, policy %.0f (%s), "
                "host stalls %s\n",
                name.c_str(), static_cast<unsigned long long>(run->decisions),
                static_cast<unsigned long long>(run->errors),
                static_cast<unsigned long long>(run->unsent), run->p99_ms(),
                policy->policy_decisions, policy->Reasons().c_str(),
                run->stalls.Describe().c_str());
  }

  for (const LoadSummary* run : {&faulty, &healed}) {
    EXPECT_GT(run->decisions, 0u);
    EXPECT_EQ(run->errors, 0u) << "failure_mode allow answers every call";
    ExpectNoStall(what, run->unsent, run->decisions);
    // A decision is due within the budget plus the queue grace twice (a lane, then the I/O
    // thread; --redis_queue_grace, 1 ms). Behind a lossy link about 1% of them come back up to
    // 8 ms after that (not yet explained; docs/failure-handling.md), and a loaded CI machine's
    // scheduler adds its own now and then, so p99 gets 30 ms of room. What must never happen is
    // waiting for TCP to retransmit (200 ms at the least): the slowest decision is bounded too,
    // 120 ms over the budget. Both on top of the reference run's, and both of the decisions no
    // stall of the host exposed (chaos_support.h). Latency is not judged under sanitizers, which
    // slow everything several times.
#if !SLUICE_TEST_SANITIZED
    EXPECT_LE(run->QuantileMsOfUnexposed(0.99, budget),
              absl::ToDoubleMilliseconds(budget + absl::Milliseconds(2 + 30)) + reference_p99_ms);
    EXPECT_LE(run->QuantileMsOfUnexposed(1.0, budget),
              absl::ToDoubleMilliseconds(budget + absl::Milliseconds(120)) + reference_max_ms)
        << "host stalls " << run->stalls.Describe();
#endif
  }
  EXPECT_GT(during.policy_decisions, 0) << "the fault never reached Sluice";
  ExpectRecovered(what + ", healed", after, healed, budget);
  EXPECT_TRUE(servers_.front()->process().running());
}

TEST_F(NetworkFaultTest, NetworkSlowerThanTheBudgetIsAnsweredInBudget) {
  ExpectAnsweredWithinBudgetThenHealed("30 ms delay", absl::Milliseconds(30), 0);
}

TEST_F(NetworkFaultTest, LossyNetworkIsAnsweredInBudget) {
  ExpectAnsweredWithinBudgetThenHealed("20% loss", absl::ZeroDuration(), 0.2);
}

}  // namespace
}  // namespace sluice
