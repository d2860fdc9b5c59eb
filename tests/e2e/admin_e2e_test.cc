// End-to-end: the admin API (POST /admin/inspect, /admin/reset) and sluicectl inspect/reset
// against three real sluice processes on one real Redis, and on a real Redis Cluster. A key
// denied on all three (each replica's over-limit cache holding it) is reset through one
// replica, and within the reset log's poll interval every replica admits it again; inspect shows
// the state before and after; the reset is in the audit log. The admin API is refused while
// off (404) and without its token (401), and a start that would serve it to other hosts without
// a token is refused.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::HttpGet;
using testing::MetricValue;
using testing::RedisCluster;
using testing::RedisServer;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;

constexpr int kLimit = 3;
constexpr char kConfig[] = R"(domain: admin
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
)";
constexpr char kToken[] = "e2e-s3cret";

enum class Store { kRedis, kCluster };

class AdminE2eTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    // An hour's window must not end while the test runs.
    const auto into_hour = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()) %
                           std::chrono::hours(1);
    if (into_hour > std::chrono::seconds(3600 - 30)) {
      std::this_thread::sleep_for(std::chrono::hours(1) - into_hour + std::chrono::seconds(1));
    }
    config_ = dir_.WriteFile("admin.yaml", kConfig);
    token_file_ = dir_.WriteFile("token", std::string(kToken) + "\n");
  }

  // Starts the store of the test's parameter.
  void StartStore() {
    if (GetParam() == Store::kRedis) {
      auto redis = RedisServer::Start();
      ASSERT_TRUE(redis.ok()) << redis.status();
      redis_ = std::move(*redis);
      store_flags_ = {"--backend=redis", "--redis_addresses=" + redis_->address()};
    } else {
      auto cluster = RedisCluster::Start({.masters = 3, .replicas_per_master = 0});
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      cluster_ = std::move(*cluster);
      store_flags_ = {"--backend=redis_cluster",
                      "--redis_addresses=" + absl::StrJoin(cluster_->SeedAddresses(), ",")};
    }
    store_flags_.push_back("--redis_timeout=500ms");
  }

  // Starts `count` more replicas on the store, each with `flags`.
  void StartReplicas(int count, const std::vector<std::string>& flags) {
    std::vector<std::string> all = store_flags_;
    all.insert(all.end(), flags.begin(), flags.end());
    for (int i = 0; i < count; ++i) {
      auto server = SluiceServer::Start(config_, all, dir_.path());
      ASSERT_TRUE(server.ok()) << server.status();
      clients_.push_back(std::make_unique<RlsClient>((*server)->grpc_address()));
      replicas_.push_back(std::move(*server));
    }
  }

  RlsResponse::Code Check(size_t replica, const std::string& user) {
    auto request = BuildRequest("admin", {"user=" + user}, 0);
    EXPECT_TRUE(request.ok());
    auto response = clients_[replica]->ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->overall_code() : RlsResponse::UNKNOWN;
  }

  double CachedKeys(size_t replica) {
    return MetricValue(HttpGet(replicas_[replica]->http_port(), "/metrics"),
                       "sluice_over_limit_cache_keys");
  }

  // sluicectl --http=<replica> <args>: its exit status and output.
  std::pair<int, std::string> Sluicectl(size_t replica, const std::string& args) {
    return RunCommand(absl::StrCat(SluiceServer::BinaryPath("sluicectl"),
                                   " --http=127.0.0.1:", replicas_[replica]->http_port(), " ",
                                   args, " 2>&1"));
  }

  TempDir dir_;
  std::string config_;
  std::string token_file_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisCluster> cluster_;
  std::vector<std::string> store_flags_;
  std::vector<std::unique_ptr<SluiceServer>> replicas_;
  std::vector<std::unique_ptr<RlsClient>> clients_;
};

// Verifies a key denied on all three replicas (each one's over-limit cache holding it) is reset
// through one of them: inspect shows the count and the cache entry before, nothing after; every
// replica admits again within the poll interval (1 s) plus a little; the audit line is logged.
TEST_P(AdminE2eTest, ResetReachesEveryReplica) {
  ASSERT_NO_FATAL_FAILURE(StartStore());
  StartReplicas(3, {"--admin_api", "--admin_token_file=" + token_file_});
  const std::string token = "--admin_token_file=" + token_file_;
  for (int i = 0; i < kLimit; ++i) {
    ASSERT_EQ(Check(0, "alice"), RlsResponse::OK);
  }
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(Check(r, "alice"), RlsResponse::OVER_LIMIT) << "replica " << r;
    EXPECT_EQ(CachedKeys(r), 1) << "replica " << r;
  }
  const auto [inspected, before] = Sluicectl(1, token + " inspect admin user=alice");
  EXPECT_EQ(inspected, 0) << before;
  EXPECT_THAT(before, HasSubstr("user=alice  fixed_window 3/hour"));
  EXPECT_THAT(before, HasSubstr("count=3"));
  EXPECT_THAT(before, HasSubstr("0 hits now   allowed, remaining 0"));
  EXPECT_THAT(before, HasSubstr("cache here   denies >= 1 hits for"));

  const auto [reset_status, reset] = Sluicectl(0, token + " reset admin user=alice");
  ASSERT_EQ(reset_status, 0) << reset;
  EXPECT_THAT(reset, HasSubstr("reset admin user=alice: 1 key deleted"));
  EXPECT_THAT(reset, HasSubstr("1 entry forgotten"));
  EXPECT_THAT(reset, HasSubstr("result          ok"));
  const absl::Time reset_at = absl::Now();
  const auto [gone_status, gone] = Sluicectl(2, token + " inspect admin user=alice");
  EXPECT_EQ(gone_status, 0) << gone;
  EXPECT_THAT(gone, HasSubstr("(missing)"));
  EXPECT_THAT(gone, HasSubstr("0 hits now   allowed, remaining 3"));

  // Replica 0 forgot at once; the others within their next read of the log. A request a cache
  // answers is denied without reaching Redis, so each replica is asked until it admits once
  // (three admissions in all, within the limit).
  std::vector<absl::Duration> admitted_after(3, absl::InfiniteDuration());
  for (size_t r = 0; r < 3; ++r) {
    while (absl::Now() - reset_at < absl::Seconds(3)) {
      if (Check(r, "alice") == RlsResponse::OK) {
        admitted_after[r] = absl::Now() - reset_at;
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_LT(admitted_after[r], absl::Milliseconds(1500)) << "replica " << r;
  }
  std::printf("admin e2e: replicas admitted again %s, %s, %s after the reset\n",
              absl::FormatDuration(admitted_after[0]).c_str(),
              absl::FormatDuration(admitted_after[1]).c_str(),
              absl::FormatDuration(admitted_after[2]).c_str());
  EXPECT_EQ(Check(2, "alice"), RlsResponse::OVER_LIMIT);  // the limit holds again

  const auto [after_status, after] = Sluicectl(2, token + " inspect admin user=alice");
  EXPECT_EQ(after_status, 0) << after;
  EXPECT_THAT(after, HasSubstr("count=3"));
  const std::string log = replicas_[0]->ReadLog();
  EXPECT_THAT(log, HasSubstr("admin reset by 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("domain admin descriptors [user=alice] keys deleted ["));
  EXPECT_THAT(log, HasSubstr("result ok"));
  // The replicas that learned from the log say so (a /metrics page may be a second old).
  double forgotten = 0;
  for (int i = 0; i < 30 && forgotten < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    forgotten = MetricValue(HttpGet(replicas_[1]->http_port(), "/metrics"),
                            "sluice_reset_log_keys_forgotten_total");
  }
  EXPECT_EQ(forgotten, 1);
}

// Verifies the admin API is 404 naming --admin_api while off, and 401 without its token or with
// another; sluicectl exits 1 saying so.
TEST_P(AdminE2eTest, RefusedWhileOffOrWithoutTheToken) {
  ASSERT_NO_FATAL_FAILURE(StartStore());
  StartReplicas(1, {});
  auto off = Sluicectl(0, "inspect admin user=alice");
  EXPECT_EQ(off.first, 1);
  EXPECT_THAT(off.second, HasSubstr("HTTP 404"));
  EXPECT_THAT(off.second, HasSubstr("--admin_api"));
  StartReplicas(1, {"--admin_api", "--admin_token_file=" + token_file_});
  auto missing = Sluicectl(1, "reset admin user=alice");
  EXPECT_EQ(missing.first, 1);
  EXPECT_THAT(missing.second, HasSubstr("HTTP 401"));
  const std::string wrong_file = dir_.WriteFile("wrong", "nope\n");
  auto wrong = Sluicectl(1, "--admin_token_file=" + wrong_file + " reset admin user=alice");
  EXPECT_EQ(wrong.first, 1);
  EXPECT_THAT(wrong.second, HasSubstr("HTTP 401"));
  auto right = Sluicectl(1, "--admin_token_file=" + token_file_ + " inspect admin user=alice");
  EXPECT_EQ(right.first, 0) << right.second;
  EXPECT_THAT(replicas_[1]->ReadLog(), ::testing::Not(HasSubstr("admin reset by")));
}

INSTANTIATE_TEST_SUITE_P(OneRedisAndACluster, AdminE2eTest,
                         ::testing::Values(Store::kRedis, Store::kCluster),
                         [](const ::testing::TestParamInfo<Store>& info) {
                           return info.param == Store::kRedis ? "Redis" : "Cluster";
                         });

// Verifies a start that would serve the admin API without a token on an address other hosts
// reach is refused, naming --admin_api, --admin_token_file and --http_address.
TEST(AdminStartE2eTest, NoTokenOffLoopbackIsRefused) {
  TempDir dir;
  const std::string config = dir.WriteFile("admin.yaml", kConfig);
  const auto [status, output] = RunCommand(
      absl::StrCat(SluiceServer::BinaryPath("sluice"), " --config=", config,
                   " --admin_api --http_address=0.0.0.0:", testing::FreePort(),
                   " --grpc_address=127.0.0.1:", testing::FreePort(), " 2>&1"));
  EXPECT_EQ(status, 1) << output;
  EXPECT_THAT(output, HasSubstr("--admin_api without --admin_token_file"));
  EXPECT_THAT(output, HasSubstr("--http_address=0.0.0.0:"));
}

}  // namespace
}  // namespace sluice
