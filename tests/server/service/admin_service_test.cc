#include "server/service/admin_service.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "server/common/logging.h"
#include "server/config/config_loader.h"
#include "server/service/rate_limiter.h"
#include "tests/server/service/request_builder.h"
#include "tests/support/fake_clock.h"
#include "tests/support/stderr_capture.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::DecideInline;
using testing::MakeRequest;

constexpr char kConfig[] = R"(domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket, burst: 10}
  - key: two
    rate_limits:
      - {unit: minute, requests_per_unit: 3}
      - {unit: hour, requests_per_unit: 10, algorithm: sliding_window_counter}
  - key: free
    rate_limit: {unlimited: true}
)";

// The memory backend with a reset log of its own: what a shared store's Reset and
// PublishResets get, and a switch to make either fail.
class LoggingBackend final : public Backend {
 public:
  explicit LoggingBackend(Backend& inner) : inner_(inner) {}
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                EvaluateCallback done) override {
    inner_.Evaluate(checks, trace, std::move(done));
  }
  absl::string_view Name() const override { return "logging"; }
  void Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) override {
    inner_.Inspect(checks, std::move(done));
  }
  void Reset(absl::Span<const LimitCheck> checks, ResetCallback done) override {
    if (!reset_status.ok()) {
      std::move(done)(reset_status, {});
      return;
    }
    inner_.Reset(checks, std::move(done));
  }
  bool SharesResets() const override { return true; }
  void PublishResets(absl::Span<const std::string> keys, PublishCallback done) override {
    published.insert(published.end(), keys.begin(), keys.end());
    std::move(done)(publish_status);
  }

  absl::Status reset_status;
  absl::Status publish_status;
  std::vector<std::string> published;

 private:
  Backend& inner_;
};

class AdminServiceTest : public ::testing::Test {
 protected:
  AdminServiceTest() {
    auto config = LoadConfigText("d.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    store_ = std::make_unique<ConfigStore>(std::shared_ptr<const Config>(std::move(*config)));
    RateLimiterOptions options;
    options.key_prefix = "p:";
    limiter_ = std::make_unique<RateLimiter>(*store_, logging_, clock_, metrics_, options,
                                             &cache_);
    AdminServiceOptions admin;
    admin.resolve.key_prefix = "p:";
    admin_ = std::make_unique<AdminService>(*store_, logging_, &cache_, admin);
  }

  void Decide(const std::string& key, const std::string& value, int times) {
    for (int i = 0; i < times; ++i) {
      ASSERT_TRUE(DecideInline(*limiter_, MakeRequest("d", {{{key, value}}})).ok());
    }
  }

  absl::StatusOr<InspectReport> Inspect(const AdminService::Request& request) {
    absl::StatusOr<InspectReport> out = absl::InternalError("no answer");
    admin_->Inspect(request, [&](absl::StatusOr<InspectReport> report) { out = std::move(report); });
    return out;
  }

  std::pair<absl::Status, ResetReport> Reset(const AdminService::Request& request) {
    std::pair<absl::Status, ResetReport> out{absl::InternalError("no answer"), {}};
    admin_->Reset(request, "127.0.0.1:1234", [&](absl::Status status, ResetReport report) {
      out = {std::move(status), std::move(report)};
    });
    return out;
  }

  FakeClock clock_{1700000000000000};
  MemoryBackend memory_{clock_};
  LoggingBackend logging_{memory_};
  OverLimitCache cache_{clock_, 100};
  Metrics metrics_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<RateLimiter> limiter_;
  std::unique_ptr<AdminService> admin_;
};

// Verifies inspect resolves a descriptor as a decision does (its rule, storage key and limit),
// shows the count decisions left and this replica's cache entry, and that a check of 0 hits
// would be answered with nothing left.
TEST_F(AdminServiceTest, InspectShowsTheStateDecisionsLeft) {
  Decide("user", "alice", 3);  // two admitted, the third denied and learned by the cache
  auto report = Inspect(MakeRequest("d", {{{"user", "alice"}}}));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->domain, "d");
  ASSERT_EQ(report->descriptors.size(), 1u);
  const DescriptorReport& descriptor = report->descriptors[0];
  EXPECT_TRUE(descriptor.matched);
  EXPECT_EQ(descriptor.stat_key, "d.user");
  ASSERT_EQ(descriptor.rules.size(), 1u);
  const RuleReport& rule = descriptor.rules[0];
  EXPECT_EQ(rule.params.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(rule.params.limit, 2u);
  EXPECT_EQ(rule.unit, "minute");
  EXPECT_EQ(rule.storage_key, "p:{d|user=alice}fw:60");
  ASSERT_EQ(rule.state.keys.size(), 1u);
  EXPECT_EQ(rule.state.keys[0].key, rule.storage_key);
  EXPECT_TRUE(rule.state.keys[0].exists);
  EXPECT_EQ(std::get<FixedWindowState>(rule.state.state).count, 2u);
  EXPECT_TRUE(rule.state.answer.allowed);
  EXPECT_EQ(rule.state.answer.remaining, 0u);
  EXPECT_GT(rule.state.answer.reset_after_us, 0);
  ASSERT_TRUE(rule.cached.has_value());
  EXPECT_EQ(rule.cached->limit, 2u);
}

// Verifies inspect writes nothing: hits, hits_addend and refunds in the request are ignored,
// and inspecting twice shows the same state.
TEST_F(AdminServiceTest, InspectWritesNothing) {
  Decide("tb", "x", 4);
  auto request = MakeRequest("d", {{{"tb", "x"}}}, /*hits=*/5);
  request.mutable_descriptors(0)->set_is_negative_hits(true);
  auto first = Inspect(request);
  auto second = Inspect(request);
  ASSERT_TRUE(first.ok() && second.ok());
  const auto& a = std::get<TokenBucketState>(first->descriptors[0].rules[0].state.state);
  const auto& b = std::get<TokenBucketState>(second->descriptors[0].rules[0].state.state);
  EXPECT_TRUE(a.initialized);
  EXPECT_EQ(a.tokens, 6);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(first->descriptors[0].rules[0].state.answer.remaining, 6u);
}

// Verifies a descriptor of several rules shows each, and an override, an unlimited rule and an
// unknown domain resolve as decisions resolve them.
TEST_F(AdminServiceTest, InspectResolvesEveryKindOfDescriptor) {
  auto request = MakeRequest("d", {{{"two", "x"}}, {{"free", "x"}}, {{"nobody", "x"}}});
  auto* overridden = request.add_descriptors();
  auto* entry = overridden->add_entries();
  entry->set_key("user");
  entry->set_value("bob");
  overridden->mutable_limit()->set_requests_per_unit(7);
  overridden->mutable_limit()->set_unit(envoy::type::v3::HOUR);
  auto report = Inspect(request);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->descriptors.size(), 4u);
  ASSERT_EQ(report->descriptors[0].rules.size(), 2u);
  EXPECT_EQ(report->descriptors[0].rules[1].params.algorithm,
            Algorithm::kSlidingWindowCounter);
  EXPECT_TRUE(report->descriptors[1].unlimited);
  EXPECT_THAT(report->descriptors[1].rules, IsEmpty());
  EXPECT_FALSE(report->descriptors[2].matched);
  const DescriptorReport& override_report = report->descriptors[3];
  EXPECT_EQ(override_report.limit_override, "7/hour");
  ASSERT_EQ(override_report.rules.size(), 1u);
  EXPECT_TRUE(override_report.rules[0].override_rule);
  EXPECT_EQ(override_report.rules[0].params.limit, 7u);
  EXPECT_EQ(override_report.rules[0].storage_key, "p:{d|user=bob}fw:3600:l7");
  auto unknown = Inspect(MakeRequest("elsewhere", {{{"user", "x"}}}));
  ASSERT_TRUE(unknown.ok());
  EXPECT_FALSE(unknown->descriptors[0].matched);
}

// Verifies a bad request is refused naming its field, and nothing resolves without a config.
TEST_F(AdminServiceTest, RefusesWhatCannotResolve) {
  auto empty_key = Inspect(MakeRequest("d", {{{"", "x"}}}));
  EXPECT_EQ(empty_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty_key.status().message(), HasSubstr("descriptors[0].entries[0].key"));
  ConfigStore none(nullptr);
  AdminService admin(none, memory_, &cache_, {});
  absl::Status status;
  admin.Inspect(MakeRequest("d", {{{"user", "x"}}}),
                [&](absl::StatusOr<InspectReport> report) { status = report.status(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
}

// Verifies reset deletes the state, forgets this replica's cache entry, tells the other
// replicas the storage keys through the log, and that the key admits again at once.
TEST_F(AdminServiceTest, ResetDeletesForgetsAndTellsTheOthers) {
  Decide("user", "alice", 3);
  ASSERT_GT(cache_.DeniedFor("p:{d|user=alice}fw:60", 1, 2), 0);
  auto [status, report] = Reset(MakeRequest("d", {{{"user", "alice"}}}));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(report.deleted, ElementsAre("p:{d|user=alice}fw:60"));
  EXPECT_EQ(report.forgotten_here, 1u);
  EXPECT_EQ(report.result, "ok");
  EXPECT_THAT(report.other_replicas, HasSubstr("reset log"));
  EXPECT_THAT(logging_.published, ElementsAre("p:{d|user=alice}fw:60"));
  EXPECT_FALSE(cache_.Peek("p:{d|user=alice}fw:60").has_value());
  auto response = DecideInline(*limiter_, MakeRequest("d", {{{"user", "alice"}}}));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->overall_code(), RateLimiter::Response::OK);
  auto after = Inspect(MakeRequest("d", {{{"user", "alice"}}}));
  EXPECT_EQ(std::get<FixedWindowState>(after->descriptors[0].rules[0].state.state).count, 1u);
}

// Verifies every rule of a descriptor is reset, and a key with no state is not counted deleted.
TEST_F(AdminServiceTest, ResetCoversEveryRuleOfTheDescriptor) {
  Decide("two", "x", 1);
  auto [status, report] = Reset(MakeRequest("d", {{{"two", "x"}}, {{"user", "nobody"}}}));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(report.deleted, ElementsAre("p:{d|two=x}fw:60", "p:{d|two=x}swc:3600"));
  EXPECT_THAT(logging_.published,
              ElementsAre("p:{d|two=x}fw:60", "p:{d|two=x}swc:3600", "p:{d|user=nobody}fw:60"));
}

// Verifies a store that cannot delete, or a log that cannot be written, fails the reset and
// says so in its report, the other replicas' words saying they were not told.
TEST_F(AdminServiceTest, ResetSaysWhatFailed) {
  logging_.publish_status = absl::UnavailableError("log down");
  auto [published, report] = Reset(MakeRequest("d", {{{"user", "alice"}}}));
  EXPECT_EQ(published.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(report.result, HasSubstr("telling the other replicas"));
  EXPECT_THAT(report.other_replicas, HasSubstr("NOT told"));
  logging_.reset_status = absl::UnavailableError("store down");
  auto [deleted, failed] = Reset(MakeRequest("d", {{{"user", "alice"}}}));
  EXPECT_EQ(deleted.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.result, HasSubstr("deleting the state"));
  EXPECT_EQ(failed.domain, "d");
}

// Verifies each reset writes one audit line at WARNING: who, domain, descriptor, keys deleted,
// result; values escaped.
TEST_F(AdminServiceTest, ResetWritesAnAuditLine) {
  SetMinLogLevel(LogLevel::kWarning);
  Decide("user", "al\nice", 1);
  testing::StderrCapture capture;
  Reset(MakeRequest("d", {{{"user", "al\nice"}}}));
  const std::string log = capture.Stop();
  SetMinLogLevel(LogLevel::kInfo);
  EXPECT_THAT(log, HasSubstr("admin reset by 127.0.0.1:1234: domain d descriptors "
                             "[user=al\\x0aice] keys deleted [p:{d|user=al%0Aice}fw:60] "
                             "result ok"));
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1);
}

// Verifies the memory backend, alone, says no other replica shares its state.
TEST_F(AdminServiceTest, MemoryBackendTellsNoOne) {
  AdminService admin(*store_, memory_, nullptr, {});
  ResetReport got;
  admin.Reset(MakeRequest("d", {{{"user", "x"}}}), "me",
              [&](absl::Status, ResetReport report) { got = std::move(report); });
  EXPECT_THAT(got.other_replicas, HasSubstr("this replica's own"));
  EXPECT_EQ(got.forgotten_here, 0u);
}

}  // namespace
}  // namespace sluice
