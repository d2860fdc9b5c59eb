#include "server/redis/write_horizon.h"

#include <atomic>
#include <memory>
#include <optional>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"
#include "tests/support/notification.h"

namespace sluice {
namespace {

using testing::Notification;

constexpr int64_t kPeriodUs = 2000;

// A WriteHorizon lives on a running loop: it is built, used and destroyed by tasks on the loop
// thread, as RedisConnection does.
class WriteHorizonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create("horizon-test");
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
  }
  void TearDown() override {
    OnLoop([&] { horizon_.reset(); });
  }

  void Make(int64_t period_us) {
    OnLoop([&] {
      horizon_.emplace(*loop_, clock_, period_us, [this] { watchdog_fired_.fetch_add(1); });
    });
  }
  template <typename F>
  void OnLoop(F f) {
    Notification done;
    ASSERT_TRUE(loop_->Post([&] {
      f();
      done.Notify();
    }));
    done.WaitForNotification();
  }

  FakeClock clock_{1000000};
  std::unique_ptr<EventLoop> loop_;
  std::optional<WriteHorizon> horizon_;
  std::atomic<int> watchdog_fired_{0};
};

// Verifies no caller may write before the loop has made its first promise.
TEST_F(WriteHorizonTest, AdmitsNothingBeforeTheLoopHasRun) {
  Make(kPeriodUs);
  EXPECT_EQ(horizon_->horizon_us(), 0);
  EXPECT_FALSE(horizon_->Admits(clock_.MonotonicMicros() + 1000000));
}

// Verifies the promise is one period from when the loop ran, and only batches due at or after
// it (and not already due) are admitted.
TEST_F(WriteHorizonTest, AdmitsDeadlinesAtOrAfterTheHorizon) {
  Make(kPeriodUs);
  OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/true); });
  const int64_t horizon = clock_.MonotonicMicros() + kPeriodUs;
  EXPECT_EQ(horizon_->horizon_us(), horizon);
  EXPECT_TRUE(horizon_->Admits(horizon));
  EXPECT_TRUE(horizon_->Admits(horizon + 5000));
  EXPECT_FALSE(horizon_->Admits(horizon - 1));
  // Time moved past the horizon without the loop running: a deadline at the horizon has passed.
  clock_.AdvanceMicros(kPeriodUs + 1);
  EXPECT_FALSE(horizon_->Admits(horizon));
  EXPECT_TRUE(horizon_->Admits(horizon + 5000));
}

// Verifies a connection that is not ready gets no promise, and Withdraw ends one.
TEST_F(WriteHorizonTest, NotReadyAndWithdrawEndThePromise) {
  Make(kPeriodUs);
  OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/true); });
  ASSERT_NE(horizon_->horizon_us(), 0);
  OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/false); });
  EXPECT_EQ(horizon_->horizon_us(), 0);
  EXPECT_FALSE(horizon_->Admits(clock_.MonotonicMicros() + 1000000));

  OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/true); });
  ASSERT_NE(horizon_->horizon_us(), 0);
  OnLoop([&] { horizon_->Withdraw(); });
  EXPECT_EQ(horizon_->horizon_us(), 0);
  EXPECT_FALSE(horizon_->Admits(clock_.MonotonicMicros() + 1000000));
}

// Verifies a zero period disables caller writes entirely.
TEST_F(WriteHorizonTest, ZeroPeriodNeverPromises) {
  Make(0);
  OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/true); });
  EXPECT_EQ(horizon_->horizon_us(), 0);
  EXPECT_FALSE(horizon_->Admits(clock_.MonotonicMicros() + 1000000));
}

// Verifies the loop notes a caller's write until it next runs.
TEST_F(WriteHorizonTest, CallerWriteIsRememberedUntilTheLoopRuns) {
  Make(kPeriodUs);
  EXPECT_FALSE(horizon_->caller_wrote());
  horizon_->NoteCallerWrite();
  EXPECT_TRUE(horizon_->caller_wrote());
  OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/true); });
  EXPECT_FALSE(horizon_->caller_wrote());
}

// Verifies the watchdog keeps the promise: it runs the owner's hook on the loop once the period
// passes with no other loop run; a withdrawn promise does not wake the loop.
TEST_F(WriteHorizonTest, WatchdogFiresUnlessWithdrawn) {
  Make(kPeriodUs);
  OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/true); });
  for (int i = 0; i < 2000 && watchdog_fired_.load() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(watchdog_fired_.load(), 1);

  OnLoop([&] {
    horizon_->LoopRan(/*connection_ready=*/true);
    horizon_->Withdraw();
  });
  absl::SleepFor(absl::Milliseconds(20));  // ten periods
  EXPECT_EQ(watchdog_fired_.load(), 1);
}

// Verifies that while the loop keeps running within each period (renewing the promise many
// times per period), the owner's hook never runs; once the loop stops running, it runs once.
TEST_F(WriteHorizonTest, RenewalsKeepTheWatchdogQuietUntilTheLoopStops) {
  constexpr int64_t kLongPeriodUs = 50000;  // long beside a loaded machine's scheduling delays
  Make(kLongPeriodUs);
  for (int i = 0; i < 200; ++i) {
    OnLoop([&] { horizon_->LoopRan(/*connection_ready=*/true); });
    EXPECT_EQ(horizon_->horizon_us(), clock_.MonotonicMicros() + kLongPeriodUs);
    clock_.AdvanceMicros(1000);
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(watchdog_fired_.load(), 0) << "the hook ran although the loop kept running";
  for (int i = 0; i < 2000 && watchdog_fired_.load() == 0; ++i) {
    clock_.AdvanceMicros(1000);
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(watchdog_fired_.load(), 1);
}

}  // namespace
}  // namespace sluice
