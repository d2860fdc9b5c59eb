#include "server/backend/per_second_backend.h"

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/redis_backend.h"
#include "tests/support/fake_clock.h"
#include "tests/support/redis_server.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records the keys it is asked about and answers each with remaining = its index in the call,
// tagged by `base`, inline or from another thread, or fails.
class FakeBackend final : public Backend {
 public:
  FakeBackend(uint64_t base, bool threaded) : base_(base), threaded_(threaded) {}

  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& /*trace*/,
                EvaluateCallback done) override {
    std::vector<Decision> decisions;
    for (const LimitCheck& check : checks) {
      keys_.emplace_back(check.key);
      decisions.push_back(Decision{true, base_ + decisions.size(), 0, 0, 0});
    }
    auto answer = [decisions, fail = fail_, done = std::move(done)]() mutable {
      if (fail) {
        std::move(done)(absl::UnavailableError("down"), {});
      } else {
        std::move(done)(absl::OkStatus(), decisions);
      }
    };
    if (threaded_) {
      std::thread(std::move(answer)).detach();
    } else {
      answer();
    }
  }
  absl::string_view Name() const override { return "fake"; }
  bool Ready() const override { return ready_; }
  void AppendMetrics(std::string* out) const override {
    absl::StrAppend(out, "# TYPE sluice_redis_x counter\nsluice_redis_x ", base_, "\n");
  }

  std::vector<std::string> keys_;
  bool fail_ = false;
  bool ready_ = true;

 private:
  const uint64_t base_;
  const bool threaded_;
};

LimitParams Period(int64_t period_us) {
  LimitParams params;
  params.algorithm = Algorithm::kFixedWindow;
  params.limit = 10;
  params.period_us = period_us;
  return params;
}

struct Outcome {
  absl::Status status;
  std::vector<Decision> decisions;
};

Outcome Decide(Backend& backend, const std::vector<LimitCheck>& checks) {
  std::promise<Outcome> promise;
  std::atomic<int> calls{0};
  backend.Evaluate(checks, [&](absl::Status status, absl::Span<const Decision> d) {
    ++calls;
    promise.set_value(Outcome{status, {d.begin(), d.end()}});
  });
  Outcome outcome = promise.get_future().get();
  EXPECT_EQ(calls.load(), 1);
  return outcome;
}

class PerSecondBackendTest : public ::testing::TestWithParam<bool> {
 protected:
  PerSecondBackendTest() {
    auto main = std::make_unique<FakeBackend>(100, GetParam());
    auto fast = std::make_unique<FakeBackend>(200, GetParam());
    main_ = main.get();
    fast_ = fast.get();
    backend_ = std::make_unique<PerSecondBackend>(std::move(main), std::move(fast));
  }

  FakeBackend* main_;
  FakeBackend* fast_;
  std::unique_ptr<PerSecondBackend> backend_;
};

// Verifies one-second checks go to the per-second backend, the rest to main, and decisions
// come back in the caller's order, whichever thread answers.
TEST_P(PerSecondBackendTest, RoutesByPeriodAndKeepsOrder) {
  Outcome out = Decide(*backend_, {{"a", Period(1'000'000), 1, 0},
                                {"b", Period(60'000'000), 1, 1},
                                {"c", Period(1'000'000), 1, 2},
                                {"d", Period(2'000'000), 1, 3}});
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_THAT(fast_->keys_, ElementsAre("a", "c"));
  EXPECT_THAT(main_->keys_, ElementsAre("b", "d"));
  ASSERT_EQ(out.decisions.size(), 4u);
  EXPECT_EQ(out.decisions[0].remaining, 200u);
  EXPECT_EQ(out.decisions[1].remaining, 100u);
  EXPECT_EQ(out.decisions[2].remaining, 201u);
  EXPECT_EQ(out.decisions[3].remaining, 101u);
}

// Verifies a group with any longer period goes whole to main; an all-second group stays.
TEST_P(PerSecondBackendTest, GroupsStayTogether) {
  Outcome out = Decide(*backend_, {{"g1", Period(1'000'000), 1, 0},
                                {"g2", Period(60'000'000), 1, 0},
                                {"h1", Period(1'000'000), 1, 1},
                                {"h2", Period(1'000'000), 1, 1}});
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_THAT(main_->keys_, ElementsAre("g1", "g2"));
  EXPECT_THAT(fast_->keys_, ElementsAre("h1", "h2"));
}

// Verifies a batch for one side only is forwarded as it is.
TEST_P(PerSecondBackendTest, OneSideOnly) {
  Outcome out = Decide(*backend_, {{"x", Period(1'000'000), 1, 0}});
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(out.decisions[0].remaining, 200u);
  EXPECT_TRUE(main_->keys_.empty());
}

// Verifies a failure of either side fails the whole batch, once.
TEST_P(PerSecondBackendTest, EitherFailureFailsTheBatch) {
  fast_->fail_ = true;
  Outcome out = Decide(*backend_, {{"a", Period(1'000'000), 1, 0}, {"b", Period(60'000'000), 1, 1}});
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(out.decisions.empty());
}

// Verifies readiness needs both, and metrics keep the two families apart.
TEST_P(PerSecondBackendTest, ReadyAndMetrics) {
  EXPECT_TRUE(backend_->Ready());
  fast_->ready_ = false;
  EXPECT_FALSE(backend_->Ready());
  std::string text;
  backend_->AppendMetrics(&text);
  EXPECT_THAT(text, HasSubstr("\nsluice_redis_x 100\n"));
  EXPECT_THAT(text, HasSubstr("\nsluice_redis_per_second_x 200\n"));
}

INSTANTIATE_TEST_SUITE_P(InlineAndThreaded, PerSecondBackendTest, ::testing::Bool());

// Verifies, on two real Redis servers, that a one-second rule's state lands on the per-second
// server and a one-minute rule's on the main one.
TEST(PerSecondBackendRedisTest, KeysLandOnTheirServer) {
  auto main_server = testing::RedisServer::Start();
  auto fast_server = testing::RedisServer::Start();
  ASSERT_TRUE(main_server.ok() && fast_server.ok());
  FakeClock clock(1700006400000000);
  auto make = [&clock](const testing::RedisServer& server) {
    RedisBackendOptions options;
    options.client.address = server.address();
    options.use_caller_clock = true;
    options.timeout = absl::Seconds(2);
    auto backend = RedisBackend::Create(options, clock);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EXPECT_TRUE((*backend)->WaitUntilReady(absl::Seconds(5)));
    return *std::move(backend);
  };
  PerSecondBackend backend(make(**main_server), make(**fast_server));
  LimitParams bucket = Period(1'000'000);
  bucket.algorithm = Algorithm::kTokenBucket;
  bucket.burst = 10;
  Outcome out = Decide(backend, {{"{s}second", bucket, 1, 0}, {"{m}minute", Period(60'000'000), 1, 1}});
  ASSERT_TRUE(out.status.ok()) << out.status;
  auto fast_keys = (*fast_server)->Command({"KEYS", "*"});
  auto main_keys = (*main_server)->Command({"KEYS", "*"});
  ASSERT_TRUE(fast_keys.ok() && main_keys.ok());
  EXPECT_EQ(*fast_keys, "{s}second");
  EXPECT_THAT(*main_keys, HasSubstr("{m}minute"));
  EXPECT_THAT(*main_keys, ::testing::Not(HasSubstr("second")));
}

}  // namespace
}  // namespace sluice
