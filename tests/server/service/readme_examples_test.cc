// The worked examples of docs/algorithms.md's "ride-hailing platform" section, decision by
// decision, on examples/config/rideshare.yaml, and of its "Token and cost budgets" section, on
// examples/config/ai_tokens.yaml: if this fails, that page is wrong.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "tests/support/fake_clock.h"
#include "server/config/config_loader.h"
#include "server/service/rate_limiter.h"
#include "tests/support/paths.h"

namespace sluice {
namespace {

using Response = RateLimiter::Response;

constexpr int64_t kSecond = 1000000;
// A whole hour (and day) on the epoch, so windows start at t = 0.
constexpr int64_t kStart = 1700006400LL * kSecond;

class ReadmeExamplesTest : public ::testing::Test {
 protected:
  explicit ReadmeExamplesTest(const std::string& example = "rideshare.yaml")
      : store_(Load(example)),
        backend_(clock_),
        limiter_(store_, backend_, clock_, metrics_, {}) {}

  static std::shared_ptr<const Config> Load(const std::string& example) {
    auto config =
        LoadConfigPath(absl::StrCat(testing::SourceDir(), "/examples/config/", example));
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  Response Ask(const std::string& key, const std::string& value, uint32_t hits = 1) {
    RateLimiter::Request request;
    request.set_domain("rideshare");
    request.set_hits_addend(hits);
    auto* e = request.add_descriptors()->add_entries();
    e->set_key(key);
    e->set_value(value);
    Response response;
    limiter_.ShouldRateLimit(request, &response, [](absl::Status s) { ASSERT_TRUE(s.ok()) << s; });
    return response;
  }

  static int64_t ResetMicros(const Response& r) {
    const auto& d = r.statuses(0).duration_until_reset();
    return d.seconds() * kSecond + d.nanos() / 1000;
  }
  static std::string RetryAfter(const Response& r) {
    return r.response_headers_to_add_size() == 1 ? r.response_headers_to_add(0).value() : "";
  }
  void At(int64_t micros) { clock_.SetMicros(kStart + micros); }

  FakeClock clock_{kStart};
  ConfigStore store_;
  MemoryBackend backend_;
  Metrics metrics_;
  RateLimiter limiter_;
};

// Verifies the token bucket example: 3 at once, the 4th waits 10 s, refilled one per 10 s.
TEST_F(ReadmeExamplesTest, TokenBucketRideRequests) {
  Response r;
  for (uint32_t remaining : {2u, 1u, 0u}) {
    r = Ask("rider_id", "r42");
    ASSERT_EQ(r.overall_code(), Response::OK);
    EXPECT_EQ(r.statuses(0).limit_remaining(), remaining);
  }
  EXPECT_EQ(ResetMicros(r), 30 * kSecond);
  Response denied = Ask("rider_id", "r42");
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(RetryAfter(denied), "10");
  At(10 * kSecond);
  EXPECT_EQ(Ask("rider_id", "r42").overall_code(), Response::OK);
}

// Verifies the leaky bucket example: five pings admitted with delays 0..4 s, the sixth waits 1 s.
TEST_F(ReadmeExamplesTest, LeakyBucketDriverPings) {
  for (int i = 0; i < 5; ++i) {
    Response r = Ask("driver_id", "d7");
    ASSERT_EQ(r.overall_code(), Response::OK) << i;
    double delay = r.has_dynamic_metadata()
                       ? r.dynamic_metadata().fields().at("sluice.delay_ms").number_value()
                       : 0.0;
    EXPECT_DOUBLE_EQ(delay, 1000.0 * i);
  }
  Response denied = Ask("driver_id", "d7");
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(RetryAfter(denied), "1");
}

// Verifies the sliding window counter example: 80 last hour, 50 now, half-way: 10 more.
TEST_F(ReadmeExamplesTest, SlidingWindowCounterTripHistory) {
  At(-30 * 60 * kSecond);
  ASSERT_EQ(Ask("history_user", "u1", 80).overall_code(), Response::OK);
  At(30 * 60 * kSecond);
  ASSERT_EQ(Ask("history_user", "u1", 50).overall_code(), Response::OK);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(Ask("history_user", "u1").overall_code(), Response::OK) << i;
  }
  EXPECT_EQ(Ask("history_user", "u1").overall_code(), Response::OVER_LIMIT);
}

// Verifies the fixed window example: 1000 a day, the 1001st waits until midnight UTC.
TEST_F(ReadmeExamplesTest, FixedWindowAdminStats) {
  At(20 * 3600 * kSecond);
  ASSERT_EQ(Ask("admin", "ops", 1000).overall_code(), Response::OK);
  Response denied = Ask("admin", "ops");
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(RetryAfter(denied), absl::StrCat(4 * 3600));
}

// Verifies the sliding log example: 0 s, 20 s, 40 s admitted; 50 s denied for 10 s.
TEST_F(ReadmeExamplesTest, SlidingWindowLogPasswordResets) {
  for (int64_t t : {0, 20, 40}) {
    At(t * kSecond);
    ASSERT_EQ(Ask("path", "/reset").overall_code(), Response::OK) << t;
  }
  At(50 * kSecond);
  Response denied = Ask("path", "/reset");
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(RetryAfter(denied), "10");
}

// Verifies the GCRA example: five at once, the sixth 100 ms later, then one per 100 ms.
TEST_F(ReadmeExamplesTest, GcraTenantCalls) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(Ask("tenant", "t1").overall_code(), Response::OK) << i;
  }
  Response denied = Ask("tenant", "t1");
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(ResetMicros(denied), 100000);
  At(100000);
  EXPECT_EQ(Ask("tenant", "t1").overall_code(), Response::OK);
  EXPECT_EQ(Ask("tenant", "t1").overall_code(), Response::OVER_LIMIT);
  At(200000);
  EXPECT_EQ(Ask("tenant", "t1").overall_code(), Response::OK);
}

class TokenBudgetExampleTest : public ReadmeExamplesTest {
 protected:
  TokenBudgetExampleTest() : ReadmeExamplesTest("ai_tokens.yaml") {}

  // One call for client c1 with descriptor hits_addend `hits` (0: a check).
  Response Call(uint64_t hits) {
    RateLimiter::Request request;
    request.set_domain("ai");
    auto* descriptor = request.add_descriptors();
    auto* e = descriptor->add_entries();
    e->set_key("client_id");
    e->set_value("c1");
    descriptor->mutable_hits_addend()->set_value(hits);
    Response response;
    limiter_.ShouldRateLimit(request, &response, [](absl::Status s) { ASSERT_TRUE(s.ok()) << s; });
    return response;
  }
};

// Verifies the token budget's table: check, report 600, check, report 700 (over: charged, debt
// of 300), a check denied with retry-after 18 s, and one that passes 18 s later.
TEST_F(TokenBudgetExampleTest, ReportOverTheBudgetIsChargedIntoDebt) {
  EXPECT_EQ(Call(0).overall_code(), Response::OK);
  Response r = Call(600);
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 400u);
  EXPECT_EQ(Call(0).statuses(0).limit_remaining(), 400u);
  EXPECT_EQ(Call(700).overall_code(), Response::OVER_LIMIT);
  r = Call(0);
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(RetryAfter(r), "18");
  EXPECT_EQ(ResetMicros(r), 18 * kSecond);
  At(18 * kSecond - 1);
  EXPECT_EQ(Call(0).overall_code(), Response::OVER_LIMIT);
  At(18 * kSecond);
  r = Call(0);
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0u);
}

}  // namespace
}  // namespace sluice
