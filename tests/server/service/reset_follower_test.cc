#include "server/service/reset_follower.h"

#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A store whose reset log answers what the test queued, and records the cursors asked.
class ScriptedLog final : public Backend {
 public:
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck>, const TraceParent&, EvaluateCallback done) override {
    std::move(done)(absl::UnimplementedError("no decisions"), {});
  }
  absl::string_view Name() const override { return "scripted"; }
  bool SharesResets() const override { return true; }
  void ReadResets(const std::string& cursor, ResetLogCallback done) override {
    std::pair<absl::Status, ResetLogPage> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cursors_.push_back(cursor);
      next = std::move(answers_.front());
      answers_.pop_front();
    }
    std::move(done)(std::move(next.first), std::move(next.second));
  }

  void Answer(absl::Status status, ResetLogPage page = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_.emplace_back(std::move(status), std::move(page));
  }
  std::vector<std::string> cursors() {
    std::lock_guard<std::mutex> lock(mu_);
    return cursors_;
  }

 private:
  std::mutex mu_;
  std::deque<std::pair<absl::Status, ResetLogPage>> answers_;
  std::vector<std::string> cursors_;
};

ResetLogPage Page(std::string cursor, std::vector<std::string> keys, bool lost = false) {
  ResetLogPage page;
  page.cursor = std::move(cursor);
  page.keys = std::move(keys);
  page.lost = lost;
  return page;
}

class ResetFollowerTest : public ::testing::Test {
 protected:
  void Deny(const std::string& key) { cache_.Remember(key, 1, 10, 60000000); }
  bool Denied(const std::string& key) { return cache_.DeniedFor(key, 1, 10) > 0; }

  FakeClock clock_;
  OverLimitCache cache_{clock_, 100};
  ScriptedLog log_;
  ResetFollower follower_{log_, cache_};
};

// Verifies the keys the log names are forgotten, and only those, each read going on from where
// the last one ended.
TEST_F(ResetFollowerTest, ForgetsTheKeysTheLogNames) {
  Deny("a");
  Deny("b");
  log_.Answer(absl::OkStatus(), Page("1-0", {}));
  log_.Answer(absl::OkStatus(), Page("3-0", {"a", "x"}));
  ASSERT_TRUE(follower_.PollOnce().ok());
  EXPECT_TRUE(Denied("a"));  // the first read only takes a place in the log
  ASSERT_TRUE(follower_.PollOnce().ok());
  EXPECT_FALSE(Denied("a"));
  EXPECT_TRUE(Denied("b"));
  EXPECT_THAT(log_.cursors(), ElementsAre("", "1-0"));
}

// Verifies a log that lost resets this replica had not read makes it forget its whole cache.
TEST_F(ResetFollowerTest, ForgetsEverythingWhenResetsWereLost) {
  Deny("a");
  Deny("b");
  log_.Answer(absl::OkStatus(), Page("1-0", {}));
  log_.Answer(absl::OkStatus(), Page("9-0", {"c"}, /*lost=*/true));
  ASSERT_TRUE(follower_.PollOnce().ok());
  ASSERT_TRUE(follower_.PollOnce().ok());
  EXPECT_FALSE(Denied("a"));
  EXPECT_FALSE(Denied("b"));
  std::string metrics;
  follower_.AppendMetrics(&metrics);
  EXPECT_THAT(metrics, HasSubstr("sluice_reset_log_cache_clears_total 1\n"));
}

// Verifies a failed read changes nothing and the next read starts from the same place.
TEST_F(ResetFollowerTest, FailedReadKeepsItsPlace) {
  Deny("a");
  log_.Answer(absl::OkStatus(), Page("1-0", {}));
  log_.Answer(absl::UnavailableError("down"));
  log_.Answer(absl::OkStatus(), Page("2-0", {"a"}));
  ASSERT_TRUE(follower_.PollOnce().ok());
  EXPECT_EQ(follower_.PollOnce().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Denied("a"));
  ASSERT_TRUE(follower_.PollOnce().ok());
  EXPECT_FALSE(Denied("a"));
  EXPECT_THAT(log_.cursors(), ElementsAre("", "1-0", "1-0"));
  std::string metrics;
  follower_.AppendMetrics(&metrics);
  EXPECT_THAT(metrics, HasSubstr("sluice_reset_log_reads_total{result=\"failed\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("sluice_reset_log_keys_forgotten_total 1\n"));
}

// Verifies a place in the log taken only after reads failed forgets the whole cache: resets
// logged meanwhile lie behind it.
TEST_F(ResetFollowerTest, LateStartForgetsEverything) {
  Deny("a");
  log_.Answer(absl::UnavailableError("down"));
  log_.Answer(absl::OkStatus(), Page("5-0", {}));
  EXPECT_FALSE(follower_.PollOnce().ok());
  EXPECT_TRUE(Denied("a"));
  ASSERT_TRUE(follower_.PollOnce().ok());
  EXPECT_FALSE(Denied("a"));
  EXPECT_THAT(log_.cursors(), ElementsAre("", ""));
}

// Verifies the thread reads the log at once and then every interval, and stops when told.
TEST(ResetFollowerThreadTest, ReadsEveryIntervalUntilStopped) {
  FakeClock clock;
  OverLimitCache cache(clock, 100);
  cache.Remember("a", 1, 10, 60000000);
  ScriptedLog log;
  log.Answer(absl::OkStatus(), Page("1-0", {}));
  for (int i = 0; i < 1000; ++i) {
    log.Answer(absl::OkStatus(), Page("2-0", {"a"}));
  }
  ResetFollower follower(log, cache, {.interval = absl::Milliseconds(10)});
  follower.Start();
  for (int i = 0; i < 500 && cache.DeniedFor("a", 1, 10) > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(cache.DeniedFor("a", 1, 10), 0);
  follower.Stop();
  const size_t reads = log.cursors().size();
  EXPECT_GE(reads, 2u);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(log.cursors().size(), reads);
}

}  // namespace
}  // namespace sluice
