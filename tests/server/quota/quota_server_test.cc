#include "server/quota/quota_server.h"

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/quota/envoy_assignment.h"

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

  Client& Open(const std::string& peer = "ipv4:10.0.0.1") {
    clients_.push_back(std::make_unique<Client>());
    Client* client = clients_.back().get();
    auto id = server_->Open([client](QuotaResponse r) { client->received.push_back(std::move(r)); },
                            peer);
    EXPECT_TRUE(id.ok()) << id.status();
    client->id = *id;
    return *client;
  }

  // A report of `requests` over `elapsed_us` for bucket {key: value} (whole seconds, as Envoy
  // sends them, unless `elapsed_us` has a fraction).
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

  // Reports bucket {key: value} of `client` every 5 s with `requests` each time, until its
  // interval was measured three times (Subscription::settled) and its demand is that of the
  // last three, with a rebalance after each.
  void Settle(Client& client, const std::string& value, const std::string& key,
              uint64_t requests) {
    for (int i = 0; i < 4; ++i) {
      now_ += 5 * kSecond;
      ASSERT_TRUE(Send(client, Usage(value, requests, 5 * kSecond, "q", key)).ok());
      server_->Tick(now_);
    }
  }

  ConfigStore store_;
  std::unique_ptr<QuotaServer> server_;
  std::vector<std::unique_ptr<Client>> clients_;
  int64_t now_ = 1000 * kSecond;
};

// Verifies the issue's example on one replica: four Envoys asking 20, 60, 150 and 300 requests a
// second of one 100/s bucket are each answered at once, and after a rebalance hold 20 and 26.7
// each: max-min shares that add up to the limit, with TTLs of four report intervals in whole
// seconds.
TEST_F(QuotaServerTest, SharesAreMaxMinFairAndAddUpToTheLimit) {
  const uint64_t asked[] = {20, 60, 150, 300};
  std::vector<Client*> envoys;
  for (size_t i = 0; i < std::size(asked); ++i) {
    Client& c = Open();
    envoys.push_back(&c);
    ASSERT_TRUE(Send(c, Usage("r1", 1, 0)).ok());  // Envoy's immediate report: 0 s
    ASSERT_NE(c.Last("r1"), nullptr);                // answered at once
    if (i == 0) {
      EXPECT_NEAR(Rate(c.Last("r1")), 100, 0.5);  // alone: the whole limit
    }
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
    // Within the hysteresis of its share (10%): a share that moved less is not sent while the
    // shares held add up to within 2% of the limit.
    const double share = i == 0 ? 20.0 : 80.0 / 3;
    EXPECT_NEAR(rate, share, 0.1 * share) << i;
    if (i == 0) {  // sent at the first rebalance: 4 report intervals, Envoy's 5 s until two
                   // ticks were measured (the gap after the immediate report is no interval)
      EXPECT_EQ(envoys[i]->Last("r1")->quota_assignment_action().assignment_time_to_live().seconds(),
                20);
    }
  }
  EXPECT_NEAR(total, 100, 2);
}

// Verifies Envoy's own reporting (global_client_impl.cc): a new bucket's immediate report of
// 0 s subscribes and is answered without ending the stream; the ticks that follow every 5 s,
// their time_elapsed truncated to 4 s, are measured as 5 s (100/s, not 125/s: the Envoy alone
// gets the whole 100/s, and its demand is shown right); the domain may be left out after the
// first report, a tick with no bucket is accepted, and nothing of this ends the stream.
TEST_F(QuotaServerTest, EnvoysReportsAreAcceptedAsEnvoySendsThem) {
  QuotaOptions options;
  options.page_values = true;
  QuotaServer server(store_, options);
  Client envoy;
  auto id = server.Open([&envoy](QuotaResponse r) { envoy.received.push_back(std::move(r)); });
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(server.Report(*id, Usage("r7", 1, 0), now_).ok());
  ASSERT_NE(envoy.Last("r7"), nullptr);
  now_ += 4'900'000;
  Reports no_domain = Usage("r7", 490, 4 * kSecond);
  no_domain.clear_domain();
  ASSERT_TRUE(server.Report(*id, no_domain, now_).ok());
  for (int i = 0; i < 3; ++i) {
    now_ += 5 * kSecond;
    ASSERT_TRUE(server.Report(*id, Usage("r7", 500, 4 * kSecond), now_).ok());
  }
  Reports empty;
  empty.set_domain("q");
  ASSERT_TRUE(server.Report(*id, empty, now_).ok());
  server.Tick(now_);
  EXPECT_THAT(server.Describe(), HasSubstr("q route=r7: 100.0/s; here 1 (demand 100.0"));
  EXPECT_EQ(server.TotalUsage().refused, 0u);
  // 5 s reports: a TTL of 4 of them.
  EXPECT_EQ(envoy.Last("r7")->quota_assignment_action().assignment_time_to_live().seconds(), 20);
}

// Verifies that a newcomer is answered at once with its fair share, the newcomer's demand taken
// as large as anyone's until its first tick measures it, and that the shares held never add up
// to more than the limit: the others, when they leave it no room, are lowered in the same
// breath (here a, alone with the whole limit, to the 20/s it asks; then b to 40/s).
TEST_F(QuotaServerTest, NewcomersGetTheirShareAtOnceAndTheOthersAreLoweredAtOnce) {
  Client& a = Open();
  ASSERT_TRUE(Send(a, Usage("r9", 1, 0)).ok());
  EXPECT_NEAR(Rate(a.Last("r9")), 100, 0.5);
  now_ += 5 * kSecond;
  ASSERT_TRUE(Send(a, Usage("r9", 100, 5 * kSecond)).ok());  // 20/s
  Client& b = Open();
  ASSERT_TRUE(Send(b, Usage("r9", 1, 0)).ok());
  EXPECT_NEAR(Rate(b.Last("r9")), 80, 0.5);
  EXPECT_NEAR(Rate(a.Last("r9")), 20, 0.5);
  Client& c = Open();
  ASSERT_TRUE(Send(c, Usage("r9", 1, 0)).ok());
  EXPECT_NEAR(Rate(c.Last("r9")), 40, 0.5);
  EXPECT_NEAR(Rate(b.Last("r9")), 40, 0.5);
  EXPECT_NEAR(Rate(a.Last("r9")), 20, 0.5);
  // The next rebalance has nothing to move.
  const size_t received = a.received.size() + b.received.size() + c.received.size();
  now_ += 100'000;
  server_->Tick(now_);
  EXPECT_EQ(a.received.size() + b.received.size() + c.received.size(), received);
}

// Verifies --rlqs_newcomer_waits: a newcomer is answered at once with what the others leave
// (nothing, when the first holds the whole limit: DENY_ALL), and the next rebalance moves
// everyone to the fair shares.
TEST_F(QuotaServerTest, WithNewcomerWaitsNewcomersGetOnlyTheRoomTheOthersLeave) {
  QuotaOptions options;
  options.newcomer_waits = true;
  server_ = std::make_unique<QuotaServer>(store_, options);
  Client& a = Open();
  ASSERT_TRUE(Send(a, Usage("r9", 1, 0)).ok());
  EXPECT_NEAR(Rate(a.Last("r9")), 100, 0.5);
  now_ += 5 * kSecond;
  ASSERT_TRUE(Send(a, Usage("r9", 100, 5 * kSecond)).ok());  // 20/s
  Client& b = Open();
  ASSERT_TRUE(Send(b, Usage("r9", 1, 0)).ok());
  EXPECT_EQ(b.Last("r9")->quota_assignment_action().rate_limit_strategy().blanket_rule(),
            envoy::type::v3::RateLimitStrategy::DENY_ALL);
  now_ += 100'000;
  server_->Tick(now_);
  // a asks 20 a second; b, not measured yet, may ask anything: 20 and 80.
  EXPECT_NEAR(Rate(a.Last("r9")), 20, 0.5);
  EXPECT_NEAR(Rate(b.Last("r9")), 80, 0.5);
  Client& c = Open();
  ASSERT_TRUE(Send(c, Usage("r9", 1, 0)).ok());
  EXPECT_EQ(c.Last("r9")->quota_assignment_action().rate_limit_strategy().blanket_rule(),
            envoy::type::v3::RateLimitStrategy::DENY_ALL);
  now_ += 100'000;
  server_->Tick(now_);
  EXPECT_NEAR(Rate(b.Last("r9")), 40, 0.5);
  EXPECT_NEAR(Rate(c.Last("r9")), 40, 0.5);
  EXPECT_NEAR(Rate(a.Last("r9")) + Rate(b.Last("r9")) + Rate(c.Last("r9")), 100, 0.5);
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
  now_ += kSecond;
  ASSERT_TRUE(Send(a, Usage("r2", 190)).ok());  // still far above an equal part: no change
  ASSERT_TRUE(Send(b, Usage("r2", 200)).ok());
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
  // A per-minute rule: half a request a second, as one token every 2 s; a lean burst until the
  // subscription settled, then, as its share meets what it asks, its share of the rule's burst.
  EXPECT_TRUE(Send(c, Usage("s", 10, kSecond, "q", "slow")).ok());
  const auto bucket = [&] {
    return c.Last("s", "slow")->quota_assignment_action().rate_limit_strategy().token_bucket();
  };
  EXPECT_EQ(bucket().tokens_per_fill().value(), 1u);
  EXPECT_EQ(bucket().fill_interval().seconds(), 2);
  EXPECT_EQ(bucket().max_tokens(), 2u);  // a lean burst is at least two tokens
  Settle(c, "s", "slow", 1);  // 0.2/s: its share meets it
  EXPECT_EQ(bucket().tokens_per_fill().value(), 1u);
  EXPECT_EQ(bucket().fill_interval().seconds(), 2);
  EXPECT_EQ(bucket().max_tokens(), 60u);
}

// Verifies the bad inputs that end a stream, each with INVALID_ARGUMENT saying what is wrong.
TEST_F(QuotaServerTest, BadReportsEndTheStream) {
  const auto status_of = [&](const Reports& reports) {
    Client& c = Open();
    return Send(c, reports);
  };
  EXPECT_THAT(status_of(Usage("r", 1, kSecond, "")).message(),
              HasSubstr("domain must not be empty in a stream's first report"));
  Reports empty_bucket = Usage("r", 1);
  empty_bucket.mutable_bucket_quota_usages(0)->mutable_bucket_id()->clear_bucket();
  EXPECT_THAT(status_of(empty_bucket).message(), HasSubstr("bucket_id must have at least one pair"));
  EXPECT_THAT(status_of(Usage("", 1)).message(), HasSubstr("must not be empty"));
  Reports negative = Usage("r", 1);
  negative.mutable_bucket_quota_usages(0)->mutable_time_elapsed()->set_seconds(-5);
  EXPECT_THAT(status_of(negative).message(), HasSubstr("time_elapsed must not be negative"));
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
  Client& c = Open();
  ASSERT_TRUE(Send(c, Usage("r", 1)).ok());
  const absl::Status other = Send(c, Usage("r", 1, kSecond, "elsewhere"));
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.message(), HasSubstr("differs from the stream's first report ('q')"));
}

// Verifies the counted bounds: streams in all and per peer address, and buckets per stream,
// each RESOURCE_EXHAUSTED naming its flag; subscriptions in all, shared with other streams, leave
// a new bucket unanswered without ending its stream; a stream's closing frees its room.
TEST_F(QuotaServerTest, CountedBoundsAreResourceExhaustedNamingTheFlag) {
  QuotaOptions small;
  small.max_streams = 3;
  small.max_streams_per_peer = 2;
  small.max_buckets_per_stream = 2;
  QuotaServer bounded(store_, small);
  auto first = bounded.Open([](QuotaResponse) {}, "ipv4:10.0.0.1");
  auto second = bounded.Open([](QuotaResponse) {}, "ipv4:10.0.0.1");
  ASSERT_TRUE(first.ok() && second.ok());
  const auto third = bounded.Open([](QuotaResponse) {}, "ipv4:10.0.0.1");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("--rlqs_max_streams_per_peer"));
  auto other_peer = bounded.Open([](QuotaResponse) {}, "ipv4:10.0.0.2");
  ASSERT_TRUE(other_peer.ok());
  EXPECT_THAT(bounded.Open([](QuotaResponse) {}, "ipv4:10.0.0.3").status().message(),
              HasSubstr("--rlqs_max_streams"));
  EXPECT_TRUE(bounded.Report(*first, Usage("a", 1), now_).ok());
  EXPECT_TRUE(bounded.Report(*first, Usage("b", 1), now_).ok());
  const absl::Status third_bucket = bounded.Report(*first, Usage("c", 1), now_);
  EXPECT_EQ(third_bucket.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third_bucket.message(), HasSubstr("--rlqs_max_buckets_per_stream"));
  bounded.Close(*first);
  EXPECT_TRUE(bounded.Open([](QuotaResponse) {}, "ipv4:10.0.0.1").ok());

  // A bound shared with other streams leaves the new bucket unanswered and the stream going;
  // once there is room, the next report of the bucket is answered.
  QuotaOptions few;
  few.max_subscriptions = 3;
  QuotaServer capped(store_, few);
  Client s2;
  auto s1 = capped.Open([](QuotaResponse) {});
  auto s2_id = capped.Open([&s2](QuotaResponse r) { s2.received.push_back(std::move(r)); });
  EXPECT_TRUE(capped.Report(*s1, Usage("a", 1), now_).ok());
  EXPECT_TRUE(capped.Report(*s1, Usage("b", 1), now_).ok());
  EXPECT_TRUE(capped.Report(*s2_id, Usage("a", 1), now_).ok());
  EXPECT_TRUE(capped.Report(*s2_id, Usage("c", 1), now_).ok());
  EXPECT_EQ(s2.Last("c"), nullptr);
  EXPECT_EQ(capped.TotalUsage().buckets_refused[0], 1u);
  std::string metrics;
  capped.AppendMetrics(&metrics);
  EXPECT_THAT(metrics,
              HasSubstr("sluice_rlqs_buckets_refused_total{bound=\"subscriptions\"} 1\n"));
  capped.Close(*s1);  // its two leave: room again
  EXPECT_TRUE(capped.Report(*s2_id, Usage("c", 1), now_).ok());
  EXPECT_NE(s2.Last("c"), nullptr);
}

// A bucket of `pairs` pairs of `bytes`-byte keys and values, named by `n`.
Reports LargeBucket(int n, int pairs, size_t bytes) {
  Reports reports;
  reports.set_domain("q");
  auto* usage = reports.add_bucket_quota_usages();
  for (int p = 0; p < pairs; ++p) {
    (*usage->mutable_bucket_id()->mutable_bucket())[absl::StrCat(p, std::string(bytes, 'k'))] =
        absl::StrCat(n, std::string(bytes, 'v'));
  }
  usage->set_num_requests_allowed(1);
  return reports;
}

// Verifies the byte budgets, checked before anything is kept: a stream of large bucket ids is
// ended at --rlqs_max_stream_mib; past a peer's --rlqs_max_peer_mib and everyone's --rlqs_max_mib
// new buckets are left unanswered and the streams go on; another peer is served at a peer's
// bound; every byte is given back when the streams close.
TEST_F(QuotaServerTest, ByteBudgetsBoundWhatAnyStreamOrPeerHolds) {
  QuotaOptions options;
  options.max_stream_bytes = 1 << 20;
  options.max_peer_bytes = 2 << 20;
  options.max_bytes = (5 << 20) / 2;
  QuotaServer server(store_, options);
  // Buckets of 32 pairs of 1 KiB keys and values: about 66 KiB each.
  const auto fill = [&](QuotaServer::StreamId id, int from) {
    for (int n = from;; ++n) {
      const absl::Status status = server.Report(id, LargeBucket(n, 32, 1000), now_);
      if (!status.ok()) {
        return std::make_pair(n - from, status);
      }
    }
  };
  std::vector<QuotaServer::StreamId> streams;
  for (int i = 0; i < 3; ++i) {
    auto id = server.Open([](QuotaResponse) {}, "ipv4:10.6.6.6");
    ASSERT_TRUE(id.ok());
    streams.push_back(*id);
  }
  auto [held, status] = fill(streams[0], 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("--rlqs_max_stream_mib"));
  EXPECT_GE(held, 10);
  EXPECT_LE(held, 16);
  server.Close(streams[0]);
  streams[0] = *server.Open([](QuotaResponse) {}, "ipv4:10.6.6.6");
  // The peer's bound: new buckets are left unanswered, the streams go on.
  for (size_t i = 0; i < streams.size(); ++i) {
    for (int n = 0; n < 14; ++n) {
      ASSERT_TRUE(server.Report(streams[i], LargeBucket(1000 * static_cast<int>(i) + n, 32, 1000),
                                now_)
                      .ok());
    }
  }
  EXPECT_GT(server.TotalUsage().buckets_refused[1], 0u);
  EXPECT_LE(server.TotalUsage().bytes, options.max_peer_bytes);
  auto other = server.Open([](QuotaResponse) {}, "ipv4:10.0.0.9");
  ASSERT_TRUE(other.ok());
  Client real;
  auto real_id = server.Open([&real](QuotaResponse r) { real.received.push_back(std::move(r)); },
                             "ipv4:10.0.0.8");
  EXPECT_TRUE(server.Report(*real_id, Usage("real", 10), now_).ok());
  EXPECT_NE(real.Last("real"), nullptr);
  for (int n = 5000; n < 5030; ++n) {
    ASSERT_TRUE(server.Report(*other, LargeBucket(n, 32, 1000), now_).ok());
  }
  EXPECT_GT(server.TotalUsage().buckets_refused[2], 0u);  // --rlqs_max_mib
  EXPECT_LE(server.TotalUsage().bytes, options.max_bytes);
  for (QuotaServer::StreamId id : streams) {
    server.Close(id);
  }
  server.Close(*other);
  server.Close(*real_id);
  EXPECT_EQ(server.TotalUsage().bytes, 0u);
  EXPECT_EQ(server.TotalUsage().buckets, 0u);
  EXPECT_EQ(server.TotalUsage().peers, 0u);
}

// Verifies idle buckets: Envoy reports every bucket on every tick, zero usage included, until
// told to abandon it; after three idle reports the subscription is abandoned (Envoy erases the
// bucket), and when traffic returns Envoy's new immediate report is answered at once.
TEST_F(QuotaServerTest, IdleBucketsAreAbandonedAndAnsweredAgainWhenTrafficReturns) {
  Client& a = Open();
  ASSERT_TRUE(Send(a, Usage("idle", 1, 0)).ok());
  for (int tick = 1; tick <= 3; ++tick) {
    now_ += 5 * kSecond;
    ASSERT_TRUE(Send(a, Usage("idle", 0, 5 * kSecond)).ok());
    ASSERT_NE(a.Last("idle"), nullptr);
    EXPECT_EQ(a.Last("idle")->has_abandon_action(), tick == 3) << tick;
  }
  EXPECT_EQ(server_->TotalUsage().subscriptions, 0u);
  EXPECT_EQ(server_->TotalUsage().abandons, 1u);
  now_ += kSecond;
  ASSERT_TRUE(Send(a, Usage("idle", 1, 0)).ok());
  ASSERT_TRUE(a.Last("idle")->has_quota_assignment_action());
  EXPECT_GT(Rate(a.Last("idle")), 0);
}

// Verifies a bucket no longer reported is abandoned after three intervals (but not before
// Envoy's reconnect and a rebalance, 6 s), and its demand leaves the pool: the remaining Envoy's
// share rises; a closed stream's demand leaves at once. A bucket whose last report counted
// requests is abandoned only after three of the longest intervals (3 min). A client that claims
// a huge time_elapsed cannot put the abandon off (the interval is the server's measure, at most
// a minute).
TEST_F(QuotaServerTest, QuietBucketsAreAbandonedAndClosedStreamsLeave) {
  Client& a = Open();
  Client& b = Open();
  Client& c = Open();
  Client& busy = Open();
  for (int i = 0; i < 2; ++i) {  // two reports a second apart: a measured interval of 1 s
    now_ += kSecond;
    for (Client* client : {&a, &b, &c}) {
      ASSERT_TRUE(Send(*client, Usage("r3", i == 0 ? 300 : 0)).ok());
    }
  }
  server_->Tick(now_);
  // b stops reporting after an idle report; a and c go on.
  const int64_t b_last_us = now_;
  const auto report_a_and_c = [&] {
    now_ += kSecond;
    ASSERT_TRUE(Send(a, Usage("r3", 300)).ok());
    ASSERT_TRUE(Send(c, Usage("r3", 300)).ok());
    server_->Tick(now_);
  };
  while (now_ - b_last_us < 5 * kSecond) {
    report_a_and_c();
  }
  EXPECT_FALSE(b.Last("r3")->has_abandon_action());  // 5 s: not yet
  report_a_and_c();
  ASSERT_NE(b.Last("r3"), nullptr);
  EXPECT_TRUE(b.Last("r3")->has_abandon_action());
  EXPECT_NEAR(Rate(a.Last("r3")), 50, 0.5);
  server_->Close(c.id);
  now_ += kSecond;
  ASSERT_TRUE(Send(a, Usage("r3", 300)).ok());
  server_->Tick(now_);
  EXPECT_NEAR(Rate(a.Last("r3")), 100, 0.5);
  EXPECT_EQ(server_->TotalUsage().subscriptions, 1u);

  Client& liar = Open();
  Reports forever = Usage("r4", 5);
  forever.mutable_bucket_quota_usages(0)->mutable_time_elapsed()->set_seconds(1'000'000'000'000);
  ASSERT_TRUE(Send(liar, forever).ok());
  now_ += 5 * kSecond;
  forever.mutable_bucket_quota_usages(0)->set_num_requests_allowed(0);
  forever.mutable_bucket_quota_usages(0)->set_num_requests_denied(0);
  ASSERT_TRUE(Send(liar, forever).ok());
  now_ += 3 * 5 * kSecond + 1;
  server_->Tick(now_);
  ASSERT_NE(liar.Last("r4"), nullptr);
  EXPECT_TRUE(liar.Last("r4")->has_abandon_action());

  // A busy bucket left unreported: kept for three minutes, then abandoned (as is every bucket
  // here by then).
  ASSERT_TRUE(Send(busy, Usage("r5", 5)).ok());
  const int64_t busy_last_us = now_;
  while (now_ + kSecond - busy_last_us < 3 * 60 * kSecond) {
    now_ += kSecond;
    server_->Tick(now_);
    ASSERT_FALSE(busy.Last("r5")->has_abandon_action()) << (now_ - busy_last_us) / kSecond;
  }
  now_ += kSecond;
  server_->Tick(now_);
  EXPECT_TRUE(busy.Last("r5")->has_abandon_action());
}

// Other replicas, as a RemoteDemand would report them: fixed demands per bucket, a failure of
// every bucket, or of the buckets of one value.
class FakeReplicas final : public RemoteDemand {
 public:
  std::vector<std::optional<std::vector<double>>> Exchange(
      const std::vector<Bucket>& buckets) override {
    published = buckets;
    std::vector<std::optional<std::vector<double>>> out;
    for (const Bucket& bucket : buckets) {
      if (fail_all || (!fail_value.empty() && bucket.key.find(fail_value) != std::string::npos)) {
        out.emplace_back();
      } else {
        out.emplace_back(demands);
      }
    }
    return out;
  }

  std::vector<double> demands;
  bool fail_all = false;
  std::string fail_value;
  std::vector<Bucket> published;
};

// Verifies the early exchange of a new bucket: made at t, it is due at t + 50 ms, exchanged then
// alone (the other replicas' Envoys asking 150 and 300, not measured on this one yet: as much as
// anyone) and its shares recomputed at once, without waiting for a rebalance: the newcomer, first
// given the whole limit, gets a third; due again at t + 300 ms, then no more. Without other
// replicas (no RemoteDemand) nothing is ever due.
TEST_F(QuotaServerTest, ANewBucketIsExchangedBeforeTheNextRebalance) {
  EXPECT_EQ(server_->FreshExchangeDueUs(), std::numeric_limits<int64_t>::max());
  FakeReplicas others;
  others.demands = {150, 300};
  QuotaServer server(store_, QuotaOptions{}, &others);
  int hooked = 0;
  server.SetFreshBucketHook([&hooked] { ++hooked; });
  Client c;
  auto id = server.Open([&c](QuotaResponse r) { c.received.push_back(std::move(r)); });
  ASSERT_TRUE(id.ok());
  c.id = *id;
  ASSERT_TRUE(server.Report(c.id, Usage("fresh", 1, 0), now_).ok());
  EXPECT_EQ(hooked, 1);
  EXPECT_NEAR(Rate(c.Last("fresh")), 100, 0.5);
  EXPECT_EQ(server.FreshExchangeDueUs(), now_ + 50'000);
  server.ExchangeFresh(now_ + 49'000);  // not due yet
  EXPECT_TRUE(others.published.empty());
  server.ExchangeFresh(now_ + 50'000);
  ASSERT_EQ(others.published.size(), 1u);
  EXPECT_NEAR(Rate(c.Last("fresh")), 100.0 / 3, 0.5);
  EXPECT_EQ(server.FreshExchangeDueUs(), now_ + 300'000);
  server.ExchangeFresh(now_ + 300'000);
  EXPECT_EQ(server.FreshExchangeDueUs(), std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(server.Report(c.id, Usage("fresh", 5, kSecond), now_ + kSecond).ok());
  EXPECT_EQ(hooked, 1);  // not a new bucket
}

// Verifies the division across replicas: this replica publishes its Envoys' demands and divides
// the limit over them and the other replicas' (20 and 60 here, 150 and 300 there: 20 and 26.7
// here); once the exchange has failed for longer than remote_stale_after_us, the failure mode
// answers (allow: ALLOW_ALL, deny: DENY_ALL), and the shares come back once it works again.
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
    const auto round = [&] {
      now_ += kSecond;
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_TRUE(server.Report(clients[i].id, Usage("r5", asked[i]), now_).ok());
      }
      server.Tick(now_);
    };
    for (int i = 0; i < 4; ++i) {
      round();
    }
    ASSERT_EQ(others.published.size(), 1u);
    EXPECT_EQ(others.published[0].domain, "q");
    EXPECT_THAT(others.published[0].local, ::testing::UnorderedElementsAre(20, 60));
    // Within the hysteresis of the shares (10%).
    EXPECT_NEAR(Rate(clients[0].Last("r5")), 20, 2);
    EXPECT_NEAR(Rate(clients[1].Last("r5")), 80.0 / 3, 2.7);
    others.fail_all = true;
    const auto blanket = [&](const Client& c) {
      return c.Last("r5")->quota_assignment_action().rate_limit_strategy().blanket_rule();
    };
    round();  // one failure: the shares stand
    EXPECT_GT(Rate(clients[0].Last("r5")), 0);
    round();
    round();  // 3 s without an exchange: past 2.5 s, the failure mode answers
    EXPECT_EQ(blanket(clients[0]), mode == FailureMode::kAllow
                                       ? envoy::type::v3::RateLimitStrategy::ALLOW_ALL
                                       : envoy::type::v3::RateLimitStrategy::DENY_ALL);
    EXPECT_EQ(server.TotalUsage().exchange_failures, 3u);
    others.fail_all = false;
    round();
    EXPECT_NEAR(Rate(clients[1].Last("r5")), 80.0 / 3, 2.7);
  }
}

// Verifies that buckets fail alone: while the exchange of one bucket fails, another bucket of the
// same replica keeps its shares; and that only buckets with a rate are exchanged (an unknown
// domain's ALLOW_ALL buckets cost the exchange nothing).
TEST_F(QuotaServerTest, OneBucketsFailedExchangeLeavesTheOthersShares) {
  FakeReplicas others;
  others.demands = {50};
  others.fail_value = "bad";
  QuotaServer server(store_, QuotaOptions{}, &others);
  Client c;
  auto id = server.Open([&c](QuotaResponse r) { c.received.push_back(std::move(r)); });
  ASSERT_TRUE(id.ok());
  Client junk;
  auto junk_id = server.Open([&junk](QuotaResponse r) { junk.received.push_back(std::move(r)); });
  for (int round = 0; round < 5; ++round) {
    now_ += kSecond;
    ASSERT_TRUE(server.Report(*id, Usage("good", 100), now_).ok());
    ASSERT_TRUE(server.Report(*id, Usage("bad", 100), now_).ok());
    for (int j = 0; j < 20; ++j) {
      ASSERT_TRUE(server.Report(*junk_id, Usage(absl::StrCat("j", j), 100, kSecond, "junk"), now_)
                      .ok());
    }
    server.Tick(now_);
  }
  for (const RemoteDemand::Bucket& published : others.published) {
    EXPECT_EQ(published.domain, "q");
  }
  EXPECT_NEAR(Rate(c.Last("good")), 50, 0.5);  // 100/s shared with a replica asking 50
  EXPECT_EQ(c.Last("bad")->quota_assignment_action().rate_limit_strategy().blanket_rule(),
            envoy::type::v3::RateLimitStrategy::ALLOW_ALL);  // --failure_mode=allow
  EXPECT_THAT(server.Describe(), HasSubstr("1 buckets answered by the failure mode"));
}

// Verifies a config reload: the rule of a bucket is matched again, and a changed rate is sent at
// the next rebalance.
TEST_F(QuotaServerTest, AReloadedRuleIsSentAtTheNextRebalance) {
  Client& a = Open();
  ASSERT_TRUE(Send(a, Usage("r8", 500)).ok());
  server_->Tick(now_);
  EXPECT_NEAR(Rate(a.Last("r8")), 100, 0.5);
  auto reloaded = LoadConfigText("q.yaml", R"(domain: q
descriptors:
  - key: route
    rate_limit: {unit: second, requests_per_unit: 40}
)");
  ASSERT_TRUE(reloaded.ok());
  store_.Set(std::shared_ptr<const Config>(std::move(*reloaded)));
  now_ += kSecond;
  ASSERT_TRUE(Send(a, Usage("r8", 500)).ok());
  server_->Tick(now_);
  EXPECT_NEAR(Rate(a.Last("r8")), 40, 0.2);
}

// Verifies a reload first seen by a newcomer's report (the bucket's rule matched again there)
// still reaches the bucket's other subscribers at the next rebalance, though their shares did
// not move: here a burst changed and the newcomer left before the rebalance (a newcomer that
// waits, so that it moves nothing of the others' shares on arrival).
TEST_F(QuotaServerTest, AReloadFirstSeenByANewcomerReachesEverySubscriber) {
  QuotaOptions options;
  options.newcomer_waits = true;
  server_ = std::make_unique<QuotaServer>(store_, options);
  const auto max_tokens = [](const Client& c) {
    const BucketAction* action = c.Last("s", "slow");
    return action == nullptr ? uint64_t{0}
                             : action->quota_assignment_action()
                                   .rate_limit_strategy()
                                   .token_bucket()
                                   .max_tokens();
  };
  Client& a = Open();
  ASSERT_TRUE(Send(a, Usage("s", 10, kSecond, "q", "slow")).ok());
  Settle(a, "s", "slow", 1);
  ASSERT_EQ(max_tokens(a), 60u);
  auto reloaded = LoadConfigText("q.yaml", R"(domain: q
descriptors:
  - key: slow
    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: token_bucket, burst: 90}
)");
  ASSERT_TRUE(reloaded.ok());
  store_.Set(std::shared_ptr<const Config>(std::move(*reloaded)));
  Client& b = Open();
  ASSERT_TRUE(Send(b, Usage("s", 10, kSecond, "q", "slow")).ok());
  server_->Close(b.id);
  a.received.clear();
  now_ += 5 * kSecond;
  ASSERT_TRUE(Send(a, Usage("s", 1, 5 * kSecond, "q", "slow")).ok());
  server_->Tick(now_);
  EXPECT_EQ(max_tokens(a), 90u);
}

// Verifies the per-rule gauges: demand, the shares sent and the demand above them; for a
// shadow-mode rule (answered ALLOW_ALL) the shares enforcing it would give and what that would
// deny.
TEST_F(QuotaServerTest, PerRuleGaugesCountShadowRulesAsIfEnforced) {
  Client& a = Open();
  Client& b = Open();
  for (int round = 0; round < 4; ++round) {
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
  EXPECT_THAT(text, HasSubstr("sluice_rlqs_state_bytes "));
}

}  // namespace
}  // namespace sluice::quota
