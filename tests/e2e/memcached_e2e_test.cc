// End-to-end on memcached: three real sluice processes share three real memcached servers
// (Debian's memcached 1.6, started by the test), and a fixed window's limit holds across them
// however their requests race; a server killed and restarted costs its keys' decisions the
// failure mode (within the budget, its breaker then answering at once) and nothing else, and its
// keys are counted again once it is back (empty, as memcached keeps nothing). A rule memcached
// cannot keep is refused at start, naming file, line and why.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/memcached/server_placement.h"
#include "tests/support/memcached_server.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::HttpGet;
using testing::MemcachedServer;
using testing::MetricValue;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;

constexpr char kConfig[] = R"(domain: mc
failure_mode: deny
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 40}
  - key: burst
    rate_limit: {unit: hour, requests_per_unit: 1000000}
)";

class MemcachedE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      auto server = MemcachedServer::Start();
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
    // An hour's window must not end while the test runs.
    const auto into_hour = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()) %
                           std::chrono::hours(1);
    if (into_hour > std::chrono::seconds(3600 - 30)) {
      std::this_thread::sleep_for(std::chrono::hours(1) - into_hour + std::chrono::seconds(1));
    }
  }

  std::string Servers() const {
    std::vector<std::string> addresses;
    for (const auto& server : servers_) {
      addresses.push_back(server->address());
    }
    return absl::StrJoin(addresses, ",");
  }

  // `budget`: --redis_timeout, which memcached's calls use too.
  void StartReplicas(int count, const std::string& budget = "20ms") {
    const std::string config = dir_.WriteFile("mc.yaml", kConfig);
    for (int i = 0; i < count; ++i) {
      auto server = SluiceServer::Start(
          config,
          {"--backend=memcached", "--memcached_servers=" + Servers(), "--redis_timeout=" + budget,
           "--over_limit_cache_keys=0"},
          dir_.path());
      ASSERT_TRUE(server.ok()) << server.status();
      clients_.push_back(std::make_unique<RlsClient>((*server)->grpc_address()));
      replicas_.push_back(std::move(*server));
    }
  }

  RlsResponse::Code Check(size_t replica, const std::string& descriptor) {
    auto request = BuildRequest("mc", {descriptor}, 0);
    EXPECT_TRUE(request.ok());
    auto response = clients_[replica]->ShouldRateLimit(*request, absl::Seconds(5));
    if (!response.ok()) {
      errors_.fetch_add(1);
      return RlsResponse::UNKNOWN;
    }
    return response->overall_code();
  }

  TempDir dir_;
  std::vector<std::unique_ptr<MemcachedServer>> servers_;
  std::vector<std::unique_ptr<SluiceServer>> replicas_;
  std::vector<std::unique_ptr<RlsClient>> clients_;
  std::atomic<int> errors_{0};
};

// Verifies three replicas admit exactly the limit of each key between them: 3 replicas x 3
// threads offer 2.5x the limit over 6 keys at once, and each key admits 40. The budget is 200 ms:
// under the whole suite's load on 2 cores a 20 ms budget now and then ran out on a call that
// memcached had counted, a failure-mode denial that left a key at 38-39 (the budget's doing,
// which KilledServerThenRestarted covers, not the limit's).
TEST_F(MemcachedE2eTest, ThreeReplicasHoldTheLimit) {
  StartReplicas(3, "200ms");
  constexpr int kKeys = 6;
  constexpr int kLimit = 40;
  constexpr int kOffers = kKeys * kLimit * 5 / 2;
  std::atomic<int> admitted[kKeys] = {};
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (size_t r = 0; r < 3; ++r) {
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, r] {
        for (int i = next.fetch_add(1); i < kOffers; i = next.fetch_add(1)) {
          const int k = i % kKeys;
          if (Check(r, absl::StrCat("user=u", k)) == RlsResponse::OK) {
            admitted[k].fetch_add(1);
          }
        }
      });
    }
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(errors_.load(), 0);
  int total = 0;
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(admitted[k].load(), kLimit) << "key u" << k;
    total += admitted[k].load();
  }
  std::printf("memcached e2e: 3 replicas x 3 threads, %d offered over %d keys, %d admitted "
              "(bound %d)\n",
              kOffers, kKeys, total, kKeys * kLimit);
}

// Verifies a killed server: its keys' decisions follow the domain's failure mode (deny) within
// the budget, the breaker opens and shows, the other servers' keys are decided as before, and
// /readyz stays ready while some server is; restarted, its keys count again from nothing.
TEST_F(MemcachedE2eTest, KilledServerThenRestarted) {
  StartReplicas(2);
  // A key on each server (upstream's key: no prefix here is --redis_key_prefix's "sluice:").
  const int64_t hour = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count() /
                       3600 * 3600;
  // Two values on each server: one for the test, one to warm the replicas' path to it first.
  std::vector<std::string> value_on(3);
  std::vector<std::string> warm_on(3);
  for (int i = 0; warm_on[0].empty() || warm_on[1].empty() || warm_on[2].empty(); ++i) {
    const std::string value = absl::StrCat("v", i);
    const size_t home = PickServer(absl::StrCat("sluice:mc_burst_", value, "_", hour), 3);
    if (value_on[home].empty()) {
      value_on[home] = value;
    } else if (warm_on[home].empty()) {
      warm_on[home] = value;
    }
  }
  // A replica's first call to a server can run past the 20 ms budget on a loaded machine (code
  // and connections not yet warm), and be answered by the failure mode: warm every path first.
  for (size_t s = 0; s < 3; ++s) {
    for (size_t r = 0; r < 2; ++r) {
      for (int attempt = 0; attempt < 100; ++attempt) {
        if (Check(r, "burst=" + warm_on[s]) == RlsResponse::OK) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(Check(0, "burst=" + value_on[s]), RlsResponse::OK);
    EXPECT_EQ(servers_[s]->Count(absl::StrCat("sluice:mc_burst_", value_on[s], "_", hour)), 1);
  }
  servers_[1]->Kill();
  int denied = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    for (size_t r = 0; r < 2; ++r) {
      const auto one = std::chrono::steady_clock::now();
      denied += Check(r, "burst=" + value_on[1]) == RlsResponse::OVER_LIMIT ? 1 : 0;
      EXPECT_LT(std::chrono::steady_clock::now() - one, std::chrono::milliseconds(500));
      EXPECT_EQ(Check(r, "burst=" + value_on[0]), RlsResponse::OK);
    }
    // The breaker opens on five failures in a row that span a budget (20 ms) at least.
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  EXPECT_EQ(denied, 40);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const std::string metrics = HttpGet(replicas_[0]->http_port(), "/metrics");
  EXPECT_EQ(MetricValue(metrics, absl::StrCat("sluice_memcached_breaker_open{node=\"",
                                              servers_[1]->address(), "\"}")),
            1)
      << metrics;
  EXPECT_GT(MetricValue(metrics, "sluice_failure_policy_decisions_total{mode=\"deny\"}"), 0);
  EXPECT_THAT(HttpGet(replicas_[0]->http_port(), "/readyz"), HasSubstr("200"));

  ASSERT_TRUE(servers_[1]->Restart().ok());
  bool back = false;
  for (int i = 0; i < 200 && !back; ++i) {
    back = Check(0, "burst=" + value_on[1]) == RlsResponse::OK;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(back);
  EXPECT_GE(servers_[1]->Count(absl::StrCat("sluice:mc_burst_", value_on[1], "_", hour)), 1);
  EXPECT_EQ(errors_.load(), 0);
}

// Verifies a rule of another algorithm is refused at start on memcached, naming file, line,
// field and why; the same file loads on the memory backend.
TEST_F(MemcachedE2eTest, OtherAlgorithmsRefusedAtLoad) {
  const std::string config = dir_.WriteFile("bucket.yaml", R"(domain: mc
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 10
      algorithm: token_bucket
)");
  const auto [status, output] = RunCommand(
      absl::StrCat(SluiceServer::BinaryPath("sluice"), " --check_config --config=", config,
                   " --backend=memcached --memcached_servers=", Servers(), " 2>&1"));
  EXPECT_EQ(status, 1) << output;
  EXPECT_THAT(output, HasSubstr("bucket.yaml:7: descriptors[0].rate_limit.algorithm: "
                                "token_bucket is not kept by --backend=memcached"));
  const auto [memory_status, memory_output] = RunCommand(absl::StrCat(
      SluiceServer::BinaryPath("sluice"), " --check_config --config=", config, " 2>&1"));
  EXPECT_EQ(memory_status, 0) << memory_output;
}

}  // namespace
}  // namespace sluice
