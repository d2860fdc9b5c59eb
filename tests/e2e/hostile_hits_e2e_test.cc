// End-to-end on Redis (standalone and Redis Cluster), with failure_mode allow, where any request
// that reaches the failure policy is admitted: a hits_addend that no rule can hold (up to
// 2^64 - 1) is denied on every algorithm and in every call shape, and consumes nothing; a fixed
// window that charges denied hits cannot be overflowed into admitting everyone; an error Redis
// returns about a command's arguments (a key of the wrong type) is decided in process, never
// by the failure policy. Each was a way past any limit (issue 29).
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
using ::testing::Not;
using testing::HttpGet;
using testing::RedisCluster;
using testing::RedisServer;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;

// Every algorithm with a small capacity (3 for the buckets and GCRA, 5 for the windows), a rule
// pair under rate_limits:, and two rules co-located by the `tenant` entry. Fixed windows count
// by the hour, so that a test never crosses a window boundary.
constexpr char kConfig[] = R"(domain: d
failure_mode: allow
descriptors:
  - key: tb
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 6, burst: 3}
  - key: lb
    rate_limit: {algorithm: leaky_bucket, unit: minute, requests_per_unit: 6, burst: 3}
  - key: gcra
    rate_limit: {algorithm: gcra, unit: minute, requests_per_unit: 6, burst: 3}
  - key: swl
    rate_limit: {algorithm: sliding_window_log, unit: minute, requests_per_unit: 5}
  - key: swc
    rate_limit: {algorithm: sliding_window_counter, unit: minute, requests_per_unit: 5}
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: big
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: multi
    rate_limits:
      - {unit: hour, requests_per_unit: 100}
      - {algorithm: token_bucket, unit: minute, requests_per_unit: 10, burst: 2}
  - key: tenant
    descriptors:
      - key: calls
        rate_limit: {unit: hour, requests_per_unit: 10, hash_tag: tenant}
      - key: uploads
        rate_limit: {algorithm: gcra, unit: minute, requests_per_unit: 1, burst: 1, hash_tag: tenant}
)";

constexpr uint64_t kHuge[] = {uint64_t{1} << 53, (uint64_t{1} << 53) + 1, uint64_t{1} << 63,
                              std::numeric_limits<uint64_t>::max() - 1,
                              std::numeric_limits<uint64_t>::max()};

class HostileHitsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    // The budget is not what these tests judge, and a call past it would be admitted by the
    // policy: a long one keeps a host that stalls for tens of milliseconds (a shared CI
    // machine) from failing them.
    std::vector<std::string> flags = {"--failure_mode=allow", "--redis_timeout=2s"};
    if (GetParam()) {
      auto cluster = RedisCluster::Start();
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      cluster_ = std::move(*cluster);
      flags.push_back("--backend=redis_cluster");
      flags.push_back("--redis_addresses=" + absl::StrJoin(cluster_->SeedAddresses(), ","));
    } else {
      auto redis = RedisServer::Start();
      ASSERT_TRUE(redis.ok()) << redis.status();
      redis_ = std::move(*redis);
      flags.push_back("--backend=redis");
      flags.push_back("--redis_addresses=" + redis_->address());
    }
    flags_ = flags;
  }

  void StartSluice(const std::vector<std::string>& more = {}) {
    std::vector<std::string> flags = flags_;
    flags.insert(flags.end(), more.begin(), more.end());
    auto server = SluiceServer::Start(dir_.WriteFile("d.yaml", kConfig), flags, dir_.path());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<RlsClient>(server_->grpc_address());
  }

  // Decides descriptors "key=value" with their hits (0: unset, one hit).
  RlsResponse Ask(const std::vector<std::pair<std::string, uint64_t>>& descriptors) {
    std::vector<std::string> texts;
    for (const auto& [text, hits] : descriptors) {
      texts.push_back(text);
    }
    auto request = BuildRequest("d", texts, 0);
    EXPECT_TRUE(request.ok()) << request.status();
    for (size_t i = 0; i < descriptors.size(); ++i) {
      if (descriptors[i].second != 0) {
        request->mutable_descriptors(static_cast<int>(i))
            ->mutable_hits_addend()
            ->set_value(descriptors[i].second);
      }
    }
    auto response = client_->ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : RlsResponse();
  }

  static bool HasRetryAfter(const RlsResponse& response) {
    for (const auto& header : response.response_headers_to_add()) {
      if (header.key() == "retry-after") {
        return true;
      }
    }
    return false;
  }

  std::string Metrics() { return HttpGet(server_->http_port(), "/metrics"); }

  // Nothing fell to the failure policy, and Redis refused nothing.
  void ExpectNoFailurePolicy() {
    const std::string metrics = Metrics();
    EXPECT_THAT(metrics, HasSubstr("sluice_failure_policy_decisions_total{mode=\"allow\"} 0"));
    EXPECT_THAT(metrics, HasSubstr("sluice_backend_failures_total{reason=\"argument\"} 0"));
    EXPECT_THAT(metrics, HasSubstr("sluice_backend_failures_total{reason=\"other\"} 0"));
  }

  // Runs `args` on the Redis node that holds the one key whose name contains `part`, with
  // "$KEY" replaced by that key's name.
  void OnTheKey(const std::string& part, std::vector<std::string> args) {
    std::vector<std::string> nodes;
    if (cluster_ != nullptr) {
      auto masters = cluster_->Masters();
      ASSERT_TRUE(masters.ok()) << masters.status();
      nodes = *masters;
    } else {
      nodes.push_back(redis_->address());
    }
    for (const std::string& node : nodes) {
      auto keys = Command(node, {"KEYS", "*" + part + "*"});
      ASSERT_TRUE(keys.ok()) << keys.status();
      if (keys->empty()) {
        continue;
      }
      std::vector<std::string> names = absl::StrSplit(*keys, '\n');
      ASSERT_EQ(names.size(), 1u) << *keys;
      for (std::string& arg : args) {
        if (arg == "$KEY") {
          arg = names[0];
        }
      }
      auto reply = Command(node, args);
      ASSERT_TRUE(reply.ok()) << reply.status();
      return;
    }
    FAIL() << "no key contains " << part;
  }

  absl::StatusOr<std::string> Command(const std::string& node,
                                      const std::vector<std::string>& args) {
    return cluster_ != nullptr ? cluster_->Command(node, args) : redis_->Command(args);
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisCluster> cluster_;
  std::vector<std::string> flags_;
  std::unique_ptr<SluiceServer> server_;
  std::unique_ptr<RlsClient> client_;
};

// Verifies, for every algorithm, that hits_addend from 2^53 to 2^64 - 1 is denied (OVER_LIMIT,
// no retry-after, since no wait helps), never reaches the failure policy, and consumes
// nothing: the next one-hit request sees the whole capacity.
TEST_P(HostileHitsTest, HugeHitsAreDeniedOnEveryAlgorithmAndConsumeNothing) {
  StartSluice();
  const std::pair<std::string, uint32_t> rules[] = {{"tb", 3}, {"lb", 3}, {"gcra", 3},
                                                    {"swl", 5}, {"swc", 5}, {"fw", 5}};
  for (const auto& [key, capacity] : rules) {
    const std::string descriptor = key + "=flood";
    for (uint64_t hits : kHuge) {
      RlsResponse over = Ask({{descriptor, hits}});
      EXPECT_EQ(over.overall_code(), RlsResponse::OVER_LIMIT) << key << " " << hits;
      EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
      EXPECT_FALSE(HasRetryAfter(over)) << key;
    }
    RlsResponse over = Ask({{descriptor, capacity + 1}});
    EXPECT_EQ(over.overall_code(), RlsResponse::OVER_LIMIT) << key;
    RlsResponse fresh = Ask({{descriptor, 1}});
    EXPECT_EQ(fresh.overall_code(), RlsResponse::OK) << key;
    EXPECT_EQ(fresh.statuses(0).limit_remaining(), capacity - 1) << key;
  }
  // The issue's reproduction, over /json: twenty times 429, never 200.
  const std::string json =
      R"({"domain":"d","descriptors":[{"entries":[{"key":"tb","value":"json"}],)"
      R"("hitsAddend":"18446744073709551615"}]})";
  for (int i = 0; i < 20; ++i) {
    const std::string reply =
        RunCommand(absl::StrCat("curl -s -i -X POST http://127.0.0.1:", server_->http_port(),
                                "/json -d '", json, "'"))
            .second;
    ASSERT_THAT(reply, HasSubstr(" 429 ")) << reply;
    EXPECT_THAT(absl::AsciiStrToLower(reply), Not(HasSubstr("retry-after"))) << reply;
  }
  ExpectNoFailurePolicy();
  // Five huge requests and one of capacity + 1 per algorithm.
  EXPECT_TRUE(absl::StrContains(
      Metrics(), "sluice_decisions_total{algorithm=\"fixed_window\",outcome=\"never_admitted\"} 6"));
}

// Verifies the call shapes that decide several checks at once: a descriptor with several rules
// and co-located descriptors are denied whole by one check that can never pass, and consume
// nothing.
TEST_P(HostileHitsTest, HugeHitsDenyAGroupWholeAndConsumeNothing) {
  StartSluice();
  RlsResponse multi = Ask({{"multi=m", ~uint64_t{0}}});
  EXPECT_EQ(multi.overall_code(), RlsResponse::OVER_LIMIT);
  multi = Ask({{"multi=m", 3}});  // the hourly window could hold 3; the bucket (2) never
  EXPECT_EQ(multi.overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_FALSE(HasRetryAfter(multi));
  RlsResponse one = Ask({{"multi=m", 1}});
  EXPECT_EQ(one.overall_code(), RlsResponse::OK);
  EXPECT_EQ(one.statuses(0).limit_remaining(), 1u);  // the bucket: 2 - 1; the window saw 1

  RlsResponse group = Ask({{"tenant=t1,calls=x", 1}, {"tenant=t1,uploads=x", uint64_t{1} << 60}});
  EXPECT_EQ(group.overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(group.statuses(0).code(), RlsResponse::OK);
  EXPECT_EQ(group.statuses(0).limit_remaining(), 10u);  // reported, not consumed
  EXPECT_EQ(group.statuses(1).code(), RlsResponse::OVER_LIMIT);
  RlsResponse calls = Ask({{"tenant=t1,calls=x", 1}});
  EXPECT_EQ(calls.statuses(0).limit_remaining(), 9u);
  ExpectNoFailurePolicy();
}

// Verifies charging denied hits (upstream's increment-first; --count_denied_hits, the older
// name of --default_charge=always) cannot be turned into an open door: hits 2^63 - 1 are denied
// as never admitted and charged (as 2^53 - 1, the most one request charges), which fills the
// window until its end without overflowing it, and a counter INCRBY cannot raise any further
// saturates as the memory backend's does (denied), where it used to fail to the failure policy.
TEST_P(HostileHitsTest, ChargedDeniedHitsCannotOverflowAFixedWindow) {
  StartSluice({"--count_denied_hits"});
  RlsResponse poison = Ask({{"big=p", (uint64_t{1} << 63) - 1}});
  EXPECT_EQ(poison.overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_FALSE(HasRetryAfter(poison));  // never admitted: no wait helps
  RlsResponse after = Ask({{"big=p", 1}});
  EXPECT_EQ(after.overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(after.statuses(0).limit_remaining(), 0u);
  EXPECT_TRUE(HasRetryAfter(after));  // the window's end

  // A counter near 2^63 - 1 (e.g. after 2^31 denied requests of 2^32 - 1 hits in a long window).
  OnTheKey("big=p", {"SET", "$KEY", "9223372036854775800"});
  for (int i = 0; i < 5; ++i) {
    RlsResponse full = Ask({{"big=p", 100}});  // INCRBY 100 would overflow
    EXPECT_EQ(full.overall_code(), RlsResponse::OVER_LIMIT) << i;
    EXPECT_TRUE(HasRetryAfter(full));  // the window's end
    EXPECT_EQ(Ask({{"big=p", 1}}).overall_code(), RlsResponse::OVER_LIMIT) << i;
  }
  ExpectNoFailurePolicy();
}

// Verifies an error Redis returns about a command's arguments or the value they met (WRONGTYPE:
// someone wrote a hash where the window's counter lives) is decided in process, as
// failure_mode local would (5 an hour on this replica), never admitted by failure_mode allow.
TEST_P(HostileHitsTest, ArgumentErrorsAreDecidedInProcessNotByTheFailurePolicy) {
  StartSluice();
  ASSERT_EQ(Ask({{"fw=typed", 1}}).overall_code(), RlsResponse::OK);
  OnTheKey("fw=typed", {"EVAL", "redis.call('DEL', KEYS[1]) return redis.call('HSET', KEYS[1], "
                        "'field', 'value')", "1", "$KEY"});
  int admitted = 0;
  for (int i = 0; i < 20; ++i) {
    admitted += Ask({{"fw=typed", 1}}).overall_code() == RlsResponse::OK ? 1 : 0;
  }
  EXPECT_EQ(admitted, 5);
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("sluice_backend_failures_total{reason=\"argument\"} 20"));
  EXPECT_THAT(metrics, HasSubstr("sluice_failure_policy_decisions_total{mode=\"allow\"} 0"));
  EXPECT_THAT(server_->ReadLog(), HasSubstr("refused a call's arguments"));
}

INSTANTIATE_TEST_SUITE_P(Redis, HostileHitsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Cluster" : "Standalone";
                         });

}  // namespace
}  // namespace sluice
