// End-to-end: usage charged after the response, as a token gateway charges it (Envoy's
// apply_on_stream_done). Three real sluice processes share one real Redis (standalone or a
// cluster); the gateway's calls go round-robin over them: on the request path a check that
// consumes nothing (descriptor hits_addend 0), and when the response is done a report of the
// tokens it used (hits_addend N, answer ignored). A rule with `charge: always` (or any rule
// under --default_charge=always) charges every report, admitted or not, so the budget goes into
// debt and no check passes until the debt is repaid.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using Response = envoy::service::ratelimit::v3::RateLimitResponse;
using testing::HttpGet;
using testing::RedisCluster;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;

// 1,000 tokens a day: the refill during a test (about 0.01 token a second) is small enough that
// a check's wait tells the debt to a tenth of a token (one token is 86.4 s of wait).
constexpr int64_t kBudget = 1000;
constexpr double kSecondsPerToken = 86400.0 / kBudget;

// `tokens` charges always by its own setting; `tokens_default` by --default_charge=always in
// the cases that set it (and not otherwise).
constexpr char kConfig[] = R"(domain: ai
descriptors:
  - key: tokens
    rate_limit:
      algorithm: token_bucket
      unit: day
      requests_per_unit: 1000
      burst: 1000
      charge: always
  - key: tokens_default
    rate_limit:
      algorithm: token_bucket
      unit: day
      requests_per_unit: 1000
      burst: 1000
)";

struct BudgetCase {
  bool cluster;
  // The rule that answers: "tokens" (charge: always) or "tokens_default" (with
  // --default_charge=always).
  const char* key;
  // --over_limit_cache_keys: checks in debt are answered in process.
  bool over_limit_cache;
};

class CostBudgetTest : public ::testing::TestWithParam<BudgetCase> {
 protected:
  void SetUp() override {
    std::vector<std::string> flags;
    if (GetParam().cluster) {
      auto cluster = RedisCluster::Start();
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      cluster_ = std::move(*cluster);
      flags = {"--backend=redis_cluster",
               "--redis_addresses=" + absl::StrJoin(cluster_->SeedAddresses(), ",")};
    } else {
      auto redis = RedisServer::Start();
      ASSERT_TRUE(redis.ok()) << redis.status();
      redis_ = std::move(*redis);
      flags = {"--backend=redis", "--redis_addresses=" + redis_->address()};
    }
    if (std::string(GetParam().key) == "tokens_default") {
      flags.push_back("--default_charge=always");
    }
    flags.push_back(
        absl::StrCat("--over_limit_cache_keys=", GetParam().over_limit_cache ? 100 : 0));
    const std::string config = dir_.WriteFile("ai.yaml", kConfig);
    for (int i = 0; i < 3; ++i) {
      auto server = SluiceServer::Start(config, flags, dir_.path());
      ASSERT_TRUE(server.ok()) << server.status();
      clients_.push_back(std::make_unique<RlsClient>((*server)->grpc_address()));
      servers_.push_back(std::move(*server));
    }
  }

  // One call for `client`'s budget with descriptor hits_addend `hits` (0: a check), through the
  // next replica.
  Response Call(const std::string& client, uint64_t hits) {
    RlsRequest request;
    request.set_domain("ai");
    auto* descriptor = request.add_descriptors();
    auto* entry = descriptor->add_entries();
    entry->set_key(GetParam().key);
    entry->set_value(client);
    descriptor->mutable_hits_addend()->set_value(hits);
    RlsClient& replica = *clients_[next_++ % clients_.size()];
    absl::StatusOr<RlsResponse> response = replica.ShouldRateLimit(request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : Response{};
  }

  bool Check(const std::string& client) { return Call(client, 0).overall_code() == Response::OK; }

  // The report when the response is done: its answer is ignored by the gateway; here it is
  // returned so that the test can say what it was.
  Response::Code Report(const std::string& client, uint64_t tokens) {
    reported_[client] += static_cast<int64_t>(tokens);
    return Call(client, tokens).overall_code();
  }

  // The tokens `client`'s budget has been charged, a probe report of 1 token included, read from
  // what that report says: admitted, the time until the bucket is full again; denied, the time
  // until one token is there again. Both count whole tokens at 86.4 s each, less the refill since
  // the first charge (a few hundredths). A report, not a check: the over-limit cache may answer a
  // check from what it learned before the last reports.
  double ChargedOf(const std::string& client) {
    reported_[client] += 1;
    const Response r = Call(client, 1);
    const auto& status = r.statuses(0);
    const double wait_s = static_cast<double>(status.duration_until_reset().seconds()) +
                          status.duration_until_reset().nanos() / 1e9;
    return status.code() == Response::OK ? wait_s / kSecondsPerToken
                                         : kBudget + wait_s / kSecondsPerToken - 1;
  }

  // The sum over the replicas of the series that starts with `series` (its labels included).
  double MetricSum(absl::string_view series) {
    double sum = 0;
    for (const auto& server : servers_) {
      for (absl::string_view line :
           absl::StrSplit(HttpGet(server->http_port(), "/metrics"), '\n')) {
        double value = 0;
        if (absl::ConsumePrefix(&line, series) && absl::ConsumePrefix(&line, " ") &&
            absl::SimpleAtod(line, &value)) {
          sum += value;
        }
      }
    }
    return sum;
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisCluster> cluster_;
  std::vector<std::unique_ptr<SluiceServer>> servers_;
  std::vector<std::unique_ptr<RlsClient>> clients_;
  size_t next_ = 0;
  std::map<std::string, int64_t> reported_;
};

// Verifies the token gateway's sequence: check, report 600, check, report 700 (over the budget:
// OVER_LIMIT, and charged all the same), and from then on every check is denied while the budget
// is in debt; reports keep being charged. What each client was charged equals what it reported,
// across three replicas, and the hits charged over the limit are counted.
TEST_P(CostBudgetTest, EveryReportedTokenIsChargedAndDebtStopsChecks) {
  // Several clients, so that on a cluster their budgets live on different nodes.
  const std::vector<std::string> clients = {"alice", "bob", "carol", "dave"};
  for (const std::string& client : clients) {
    SCOPED_TRACE(client);
    EXPECT_TRUE(Check(client));
    EXPECT_EQ(Report(client, 600), Response::OK);
    EXPECT_TRUE(Check(client));
    EXPECT_EQ(Report(client, 700), Response::OVER_LIMIT);  // 700 > 400 left: charged, in debt
    EXPECT_FALSE(Check(client));
    // Reports of responses still streaming when the debt began: charged too.
    EXPECT_EQ(Report(client, 50), Response::OVER_LIMIT);
    for (int i = 0; i < 6; ++i) {
      EXPECT_FALSE(Check(client)) << "check " << i << " admitted while in debt";
    }
    const double charged = ChargedOf(client);  // before reading reported_: it adds its probe
    EXPECT_NEAR(charged, static_cast<double>(reported_[client]), 0.2);
  }
  // Each client was charged 751 hits while over its limit (700, 50 and the probe).
  EXPECT_EQ(MetricSum("sluice_hits_charged_over_limit_total{algorithm=\"token_bucket\"}"),
            751.0 * static_cast<double>(clients.size()));
  if (GetParam().over_limit_cache) {
    // Checks in debt were answered in process (reports never are: they must be charged).
    EXPECT_GT(MetricSum("sluice_decisions_total{algorithm=\"token_bucket\","
                        "outcome=\"over_limit_cached\"}"),
              0.0);
  }

  // A budget that is not spent past its end admits checks until it is, and reports charge
  // exactly what they say.
  int admitted_reports = 0;
  for (int i = 0; i < 40; ++i) {
    if (!Check("erin")) {
      break;
    }
    admitted_reports += Report("erin", 37) == Response::OK;
  }
  // 27 reports of 37 fit in 1,000; the 28th (to 1,036) is charged over it; then checks stop.
  EXPECT_EQ(admitted_reports, 27);
  EXPECT_EQ(reported_["erin"], 28 * 37);
  EXPECT_NEAR(ChargedOf("erin"), 28.0 * 37.0 + 1, 0.2);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CostBudgetTest,
    ::testing::Values(BudgetCase{false, "tokens", false}, BudgetCase{false, "tokens", true},
                      BudgetCase{false, "tokens_default", false},
                      BudgetCase{true, "tokens", false}, BudgetCase{true, "tokens", true}),
    [](const ::testing::TestParamInfo<BudgetCase>& info) {
      return absl::StrCat(info.param.cluster ? "Cluster" : "Redis", "_", info.param.key,
                          info.param.over_limit_cache ? "_OverLimitCache" : "");
    });

}  // namespace
}  // namespace sluice
