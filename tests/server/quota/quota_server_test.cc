#include "server/quota/quota_server.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"

namespace sluice::quota {
namespace {

using ::testing::HasSubstr;
using BucketAction = QuotaResponse::BucketAction;

constexpr char kConfig[] = R"(domain: q
descriptors:
  - key: route
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: route
    value: closed
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: route
    value: trial
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: health
    rate_limit: {unlimited: true}
  - key: slow
    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: token_bucket, burst: 60}
)";

constexpr int64_t kSecond = 1'000'000;

// One stream's side: what the server sent it.
struct Client {
  QuotaServer::StreamId id = 0;
  std::vector<QuotaResponse> received;

  // The last action sent for bucket `value` of key "route" (or the key given), if any.
  const BucketAction* Last(const std::string& value, const std::string& key = "route") const {
    for (auto r = received.rbegin(); r != received.rend(); ++r) {
      for (const BucketAction& action : r->bucket_action()) {
        auto it = action.bucket_id().bucket().find(key);
        if (it != action.bucket_id().bucket().end() && it->second == value) {
          return &action;
        }
      }
    }
    return nullptr;
  }
};

// The rate a token-bucket assignment admits, requests per second; -1 if it is not one.
double Rate(const BucketAction* action) {
  if (action == nullptr || !action->has_quota_assignment_action() ||
      !action->quota_assignment_action().rate_limit_strategy().has_token_bucket()) {
    return -1;
  }
  const auto& bucket = action->quota_assignment_action().rate_limit_strategy().token_bucket();
  return static_cast<double>(bucket.tokens_per_fill().value()) /
         static_cast<double>(bucket.fill_interval().seconds());
}

class QuotaServerTest : public ::testing::Test {
 protected:
  QuotaServerTest() : store_(Load()) {
    server_ = std::make_unique<QuotaServer>(store_, QuotaOptions{});
  }

  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigText("q.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  Client& Open() {
    clients_.push_back(std::make_unique<Client>());
    Client* client = clients_.back().get();
    auto id = server_->Open([client](QuotaResponse r) { client->received.push_back(std::move(r)); });
    EXPECT_TRUE(id.ok()) << id.status();
    client->id = *id;
    return *client;
  }

  // A report of `requests` over `elapsed_us` for bucket {key: value}.
  static Reports Usage(const std::string& value, uint64_t requests, int64_t elapsed_us = kSecond,
                       const std::string& domain = "q", const std::string& key = "route") {
    Reports reports;
    reports.set_domain(domain);
    auto* usage = reports.add_bucket_quota_usages();
    (*usage->mutable_bucket_id()->mutable_bucket())[key] = value;
    usage->mutable_time_elapsed()->set_seconds(elapsed_us / kSecond);
    usage->mutable_time_elapsed()->set_nanos(static_cast<int32_t>(elapsed_us % kSecond) * 1000);
    usage->set_num_requests_allowed(requests / 2);
    usage->set_num_requests_denied(requests - requests / 2);
    return reports;
  }

  absl::Status Send(Client& client, const Reports& reports) {
    return server_->Report(client.id, reports, now_);
  }

  ConfigStore store_;
  std::unique_ptr<QuotaServer> server_;
  std::vector<std::unique_ptr<Client>> clients_;
  int64_t now_ = 1000 * kSecond;
};

// Verifies the issue's example on one replica: four Envoys asking 20, 60, 150 and 300 requests a
// second of one 100/s bucket are each answered at once, and after a rebalance hold 20 and 26.7
// each: max-min shares that add up to the limit.
TEST_F(QuotaServerTest, SharesAreMaxMinFairAndAddUpToTheLimit) {
  const uint64_t asked[] = {20, 60, 150, 300};
  std::vector<Client*> envoys;
  for (uint64_t a : asked) {
    Client& c = Open();
    envoys.push_back(&c);
    ASSERT_TRUE(Send(c, Usage("r1", a)).ok());
    ASSERT_NE(c.Last("r1"), nullptr);  // answered at once
    EXPECT_GT(Rate(c.Last("r1")), 0);
  }
  for (int round = 0; round < 3; ++round) {
    now_ += kSecond;
    for (size_t i = 0; i < envoys.size(); ++i) {
      ASSERT_TRUE(Send(*envoys[i], Usage("r1", asked[i])).ok());
    }
    server_->Tick(now_);
  }
  double total = 0;
  for (size_t i = 0; i < envoys.size(); ++i) {
    const double rate = Rate(envoys[i]->Last("r1"));
    total += rate;
    // Within the 3% of the whole-second bucket closest to the share (fair_share.h).
    const double share = i == 0 ? 20.0 : 80.0 / 3;
    EXPECT_NEAR(rate, share, 0.03 * share) << i;
    const auto& action = envoys[i]->Last("r1")->quota_assignment_action();
    EXPECT_EQ(action.assignment_time_to_live().seconds(), 3);  // 3 report intervals
  }
  EXPECT_NEAR(total, 100, 3);
}

// Verifies the hysteresis: a demand that moves a share by less than 10% sends nothing at the
// rebalance, one that moves it more sends the new share.
TEST_F(QuotaServerTest, OnlySharesThatMovedPastTheHysteresisAreSent) {
  Client& a = Open();
  Client& b = Open();
  ASSERT_TRUE(Send(a, Usage("r2", 200)).ok());
  ASSERT_TRUE(Send(b, Usage("r2", 200)).ok());
  now_ += kSecond;
  server_->Tick(now_);
  EXPECT_NEAR(Rate(a.Last("r2")), 50, 0.5);
  const size_t sent = a.received.size();
  ASSERT_TRUE(Send(a, Usage("r2", 190)).ok());  // still far above an equal part: no change
  now_ += 100'000;
  server_->Tick(now_);
  EXPECT_EQ(a.received.size(), sent);
  for (int i = 0; i < 3; ++i) {  // a now asks 10 a second: b's share rises to 90
    now_ += kSecond;
    ASSERT_TRUE(Send(a, Usage("r2", 10)).ok());
    ASSERT_TRUE(Send(b, Usage("r2", 200)).ok());
  }
  server_->Tick(now_);
  EXPECT_NEAR(Rate(b.Last("r2")), 90, 1);
}

// Verifies the blanket answers: no rule and unlimited allow all, a shadow-mode rule allows all,
// a limit of 0 denies all.
TEST_F(QuotaServerTest, RulesWithoutAShareAreBlanketRules) {
  Client& c = Open();
  const auto blanket = [&](const std::string& key, const std::string& value) {
    Reports reports = Usage(value, 1, kSecond, "q", key);
    EXPECT_TRUE(Send(c, reports).ok());
    const BucketAction* action = c.Last(value, key);
    EXPECT_NE(action, nullptr);
    return action == nullptr ? -1
                             : static_cast<int>(action->quota_assignment_action()
                                                    .rate_limit_strategy()
                                                    .blanket_rule());
  };
  EXPECT_EQ(blanket("route", "closed"), envoy::type::v3::RateLimitStrategy::DENY_ALL);
  EXPECT_EQ(blanket("route", "trial"), envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
  EXPECT_EQ(blanket("health", "h"), envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
  EXPECT_EQ(blanket("unknown", "u"), envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
  // A per-minute rule: half a request a second, as one token every 2 s, with its burst share.
  EXPECT_TRUE(Send(c, Usage("s", 10, kSecond, "q", "slow")).ok());
  const auto& bucket =
      c.Last("s", "slow")->quota_assignment_action().rate_limit_strategy().token_bucket();
  EXPECT_EQ(bucket.tokens_per_fill().value(), 1u);
  EXPECT_EQ(bucket.fill_interval().seconds(), 2);
  EXPECT_EQ(bucket.max_tokens(), 60u);
}

// Verifies the bad inputs that end a stream, each with INVALID_ARGUMENT saying what is wrong,
// and the bounds (RESOURCE_EXHAUSTED).
TEST_F(QuotaServerTest, BadReportsAndBoundsEndTheStream) {
  const auto status_of = [&](const Reports& reports) {
    Client& c = Open();
    return Send(c, reports);
  };
  EXPECT_THAT(status_of(Usage("r", 1, kSecond, "")).message(), HasSubstr("domain must not be empty"));
  Reports empty_bucket = Usage("r", 1);
  empty_bucket.mutable_bucket_quota_usages(0)->mutable_bucket_id()->clear_bucket();
  EXPECT_THAT(status_of(empty_bucket).message(), HasSubstr("bucket_id must have at least one pair"));
  EXPECT_THAT(status_of(Usage("", 1)).message(), HasSubstr("must not be empty"));
  EXPECT_THAT(status_of(Usage("r", 1, 0)).message(), HasSubstr("time_elapsed must be more than 0"));
  EXPECT_THAT(status_of(Usage("r", 1, kSecond, std::string(2000, 'd'))).message(),
              HasSubstr("domain is 2000 bytes (at most 1024)"));
  EXPECT_THAT(status_of(Usage(std::string(1025, 'v'), 1)).message(),
              HasSubstr("longer than 1024 bytes"));
  Reports many_pairs = Usage("r", 1);
  for (int i = 0; i < 40; ++i) {
    (*many_pairs.mutable_bucket_quota_usages(0)->mutable_bucket_id()->mutable_bucket())[
        absl::StrCat("k", i)] = "v";
  }
  EXPECT_THAT(status_of(many_pairs).message(), HasSubstr("pairs (at most 32)"));
  // A domain with any bytes, a NUL among them, is one domain (the fuzzer found a split on NUL).
  Client& odd = Open();
  const std::string nul_domain("a\0b", 3);
  ASSERT_TRUE(Send(odd, Usage("r", 1, kSecond, nul_domain)).ok());
  server_->Tick(now_);
  server_->Tick(now_ + kSecond);
  EXPECT_EQ(server_->TotalUsage().buckets, 1u);
  Reports none;
  none.set_domain("q");
  EXPECT_THAT(status_of(none).message(), HasSubstr("bucket_quota_usages must not be empty"));
  Client& c = Open();
  ASSERT_TRUE(Send(c, Usage("r", 1)).ok());
  const absl::Status other = Send(c, Usage("r", 1, kSecond, "elsewhere"));
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.message(), HasSubstr("differs from the stream's first report ('q')"));

  QuotaOptions small;
  small.max_streams = 1;
  small.max_buckets_per_stream = 2;
  QuotaServer bounded(store_, small);
  auto first = bounded.Open([](QuotaResponse) {});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(bounded.Open([](QuotaResponse) {}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(bounded.Report(*first, Usage("a", 1), now_).ok());
  EXPECT_TRUE(bounded.Report(*first, Usage("b", 1), now_).ok());
  EXPECT_EQ(bounded.Report(*first, Usage("c", 1), now_).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(bounded.TotalUsage().refused, 2u);
  QuotaOptions few;
  few.max_subscriptions = 3;
  QuotaServer capped(store_, few);
  auto s1 = capped.Open([](QuotaResponse) {});
  auto s2 = capped.Open([](QuotaResponse) {});
  EXPECT_TRUE(capped.Report(*s1, Usage("a", 1), now_).ok());
  EXPECT_TRUE(capped.Report(*s1, Usage("b", 1), now_).ok());
  EXPECT_TRUE(capped.Report(*s2, Usage("a", 1), now_).ok());
  const absl::Status full = capped.Report(*s2, Usage("c", 1), now_);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("--rlqs_max_subscriptions"));
  capped.Close(*s1);  // its two leave: room again
  EXPECT_TRUE(capped.Report(*s2, Usage("c", 1), now_).ok());
}

// Verifies a bucket no longer reported is abandoned after three intervals, and its demand leaves
// the pool: the remaining Envoy's share rises; a closed stream's demand leaves at once.
TEST_F(QuotaServerTest, QuietBucketsAreAbandonedAndClosedStreamsLeave) {
  Client& a = Open();
  Client& b = Open();
  Client& c = Open();
  for (Client* client : {&a, &b, &c}) {
    ASSERT_TRUE(Send(*client, Usage("r3", 300)).ok());
  }
  server_->Tick(now_);
  EXPECT_NEAR(Rate(a.Last("r3")), 100.0 / 3, 0.5);
  // b stops reporting; a and c go on.
  for (int i = 0; i < 4; ++i) {
    now_ += kSecond;
    ASSERT_TRUE(Send(a, Usage("r3", 300)).ok());
    ASSERT_TRUE(Send(c, Usage("r3", 300)).ok());
    server_->Tick(now_);
  }
  ASSERT_NE(b.Last("r3"), nullptr);
  EXPECT_TRUE(b.Last("r3")->has_abandon_action());
  EXPECT_NEAR(Rate(a.Last("r3")), 50, 0.5);
  server_->Close(c.id);
  now_ += kSecond;
  ASSERT_TRUE(Send(a, Usage("r3", 300)).ok());
  server_->Tick(now_);
  EXPECT_NEAR(Rate(a.Last("r3")), 100, 0.5);
  EXPECT_EQ(server_->TotalUsage().subscriptions, 1u);
}

// Other replicas, as a RemoteDemand would report them: fixed demands per bucket value, or a
// failure.
class FakeReplicas final : public RemoteDemand {
 public:
  absl::StatusOr<std::vector<std::vector<double>>> Exchange(
      const std::vector<Bucket>& buckets) override {
    published = buckets;
    if (!status.ok()) {
      return status;
    }
    std::vector<std::vector<double>> out;
    for (size_t i = 0; i < buckets.size(); ++i) {
      out.push_back(demands);
    }
    return out;
  }

  std::vector<double> demands;
  absl::Status status;
  std::vector<Bucket> published;
};

// Verifies the division across replicas: this replica publishes its Envoys' demands and divides
// the limit over them and the other replicas' (20 and 60 here, 150 and 300 there: 20 and 26.7
// here); while the exchange fails, the failure mode answers (allow: ALLOW_ALL, deny: DENY_ALL),
// and the shares come back once it works again.
TEST_F(QuotaServerTest, SharesCountTheOtherReplicasAndFollowTheFailureModeWithout) {
  for (FailureMode mode : {FailureMode::kAllow, FailureMode::kDeny}) {
    FakeReplicas others;
    others.demands = {150, 300};
    QuotaOptions options;
    options.failure_mode = mode;
    QuotaServer server(store_, options, &others);
    std::vector<Client> clients(2);
    for (Client& c : clients) {
      auto id = server.Open([&c](QuotaResponse r) { c.received.push_back(std::move(r)); });
      ASSERT_TRUE(id.ok());
      c.id = *id;
    }
    const uint64_t asked[] = {20, 60};
    for (int round = 0; round < 3; ++round) {
      now_ += kSecond;
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_TRUE(server.Report(clients[i].id, Usage("r5", asked[i]), now_).ok());
      }
      server.Tick(now_);
    }
    ASSERT_EQ(others.published.size(), 1u);
    EXPECT_EQ(others.published[0].domain, "q");
    EXPECT_THAT(others.published[0].local, ::testing::UnorderedElementsAre(20, 60));
    EXPECT_NEAR(Rate(clients[0].Last("r5")), 20, 0.6);
    EXPECT_NEAR(Rate(clients[1].Last("r5")), 80.0 / 3, 0.8);
    others.status = absl::UnavailableError("redis down");
    now_ += kSecond;
    server.Tick(now_);
    const auto blanket = [&](const Client& c) {
      return c.Last("r5")->quota_assignment_action().rate_limit_strategy().blanket_rule();
    };
    EXPECT_EQ(blanket(clients[0]), mode == FailureMode::kAllow
                                       ? envoy::type::v3::RateLimitStrategy::ALLOW_ALL
                                       : envoy::type::v3::RateLimitStrategy::DENY_ALL);
    EXPECT_EQ(server.TotalUsage().exchange_failures, 1u);
    others.status = absl::OkStatus();
    now_ += kSecond;
    server.Tick(now_);
    EXPECT_NEAR(Rate(clients[1].Last("r5")), 80.0 / 3, 0.8);
  }
}

// Verifies the per-rule gauges: demand, the shares sent and the demand above them; for a
// shadow-mode rule (answered ALLOW_ALL) the shares enforcing it would give and what that would
// deny.
TEST_F(QuotaServerTest, PerRuleGaugesCountShadowRulesAsIfEnforced) {
  Client& a = Open();
  Client& b = Open();
  for (int round = 0; round < 3; ++round) {
    now_ += kSecond;
    ASSERT_TRUE(Send(a, Usage("trial", 30)).ok());
    ASSERT_TRUE(Send(b, Usage("trial", 10)).ok());
    ASSERT_TRUE(Send(a, Usage("r6", 150)).ok());
    ASSERT_TRUE(Send(b, Usage("r6", 150)).ok());
    server_->Tick(now_);
  }
  EXPECT_EQ(a.Last("trial")->quota_assignment_action().rate_limit_strategy().blanket_rule(),
            envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
  std::string text;
  server_->AppendMetrics(&text);
  // The shadow rule allows 1 a second: shares 0.5 and 0.5 of demands 30 and 10.
  EXPECT_THAT(text, HasSubstr("sluice_rlqs_rule_demand{key=\"q.route_trial\"} 40\n"));
  EXPECT_THAT(text, HasSubstr("sluice_rlqs_rule_share{key=\"q.route_trial\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("sluice_rlqs_rule_over_share{key=\"q.route_trial\"} 39\n"));
  // The enforced 100/s rule: 50 and 50 of 150 and 150.
  EXPECT_THAT(text, HasSubstr("sluice_rlqs_rule_demand{key=\"q.route\"} 300\n"));
  EXPECT_THAT(text, HasSubstr("sluice_rlqs_rule_share{key=\"q.route\"} 100\n"));
  EXPECT_THAT(text, HasSubstr("sluice_rlqs_rule_over_share{key=\"q.route\"} 200\n"));
}

// Verifies ExpireAll (shutdown) sends every subscribed bucket an assignment with TTL 0.
TEST_F(QuotaServerTest, ExpireAllSendsTtlZero) {
  Client& a = Open();
  ASSERT_TRUE(Send(a, Usage("x", 5)).ok());
  ASSERT_TRUE(Send(a, Usage("y", 5)).ok());
  server_->ExpireAll();
  const QuotaResponse& last = a.received.back();
  ASSERT_EQ(last.bucket_action_size(), 2);
  for (const BucketAction& action : last.bucket_action()) {
    ASSERT_TRUE(action.has_quota_assignment_action());
    EXPECT_TRUE(action.quota_assignment_action().has_assignment_time_to_live());
    EXPECT_EQ(action.quota_assignment_action().assignment_time_to_live().seconds(), 0);
  }
}

}  // namespace
}  // namespace sluice::quota
