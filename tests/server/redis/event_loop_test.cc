#include "server/redis/event_loop.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/notification.h"

namespace sluice {
namespace {

using testing::Notification;

class EventLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create("test-loop");
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
  }

  std::unique_ptr<EventLoop> loop_;
};

// Verifies posted tasks run on the loop thread, never inline.
TEST_F(EventLoopTest, RunsTasksOnLoopThread) {
  EXPECT_FALSE(loop_->IsLoopThread());
  Notification done;
  bool on_loop = false;
  ASSERT_TRUE(loop_->Post([&] {
    on_loop = loop_->IsLoopThread();
    done.Notify();
  }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(on_loop);
}

// Verifies many concurrent posters lose nothing and each poster's tasks run in its order.
TEST_F(EventLoopTest, ConcurrentPostsRunOnceInOrder) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  std::vector<int> next(kThreads, 0);  // touched only on the loop thread
  std::atomic<bool> in_order{true};
  std::mutex mu;
  std::condition_variable progressed;
  int ran = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop_->Post([&, t, i] {
          if (next[t] != i) {
            in_order = false;
          }
          next[t] = i + 1;
          std::lock_guard<std::mutex> lock(mu);
          ++ran;
          progressed.notify_all();
        });
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(progressed.wait_for(lock, std::chrono::seconds(30),
                                  [&] { return ran == kThreads * kPerThread; }));
  EXPECT_TRUE(in_order);
  EXPECT_LE(loop_->wakeups(), static_cast<uint64_t>(kThreads * kPerThread));
}

// Verifies posts that pile up while the loop is busy are run after a single wake-up.
TEST_F(EventLoopTest, BatchesPostsPerWakeUp) {
  Notification busy;
  Notification release;
  loop_->Post([&] {
    busy.Notify();
    release.WaitForNotification();
  });
  ASSERT_TRUE(busy.WaitForNotificationWithTimeout(absl::Seconds(10)));
  uint64_t wakeups_before = loop_->wakeups();
  std::atomic<int> ran{0};
  Notification all_ran;
  for (int i = 0; i < 1000; ++i) {
    loop_->Post([&] {
      if (++ran == 1000) {
        all_ran.Notify();
      }
    });
  }
  release.Notify();
  ASSERT_TRUE(all_ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LE(loop_->wakeups() - wakeups_before, 1u);
}

// Verifies a timer fires once after its delay, and a cancelled one does not fire.
TEST_F(EventLoopTest, TimersFireAndCancel) {
  Notification fired;
  std::atomic<int> cancelled_fired{0};
  std::unique_ptr<LoopTimer> timer;
  std::unique_ptr<LoopTimer> cancelled;
  absl::Time armed_at = absl::Now();
  loop_->Post([&] {
    timer = std::make_unique<LoopTimer>(*loop_, [&] { fired.Notify(); });
    cancelled = std::make_unique<LoopTimer>(*loop_, [&] { ++cancelled_fired; });
    timer->Arm(50000);
    cancelled->Arm(10000);
    cancelled->Cancel();
  });
  ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_GE(absl::Now() - armed_at, absl::Milliseconds(45));
  Notification cleaned;
  loop_->Post([&] {
    EXPECT_FALSE(timer->armed());
    timer.reset();
    cancelled.reset();
    cleaned.Notify();
  });
  ASSERT_TRUE(cleaned.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(cancelled_fired, 0);
}

// Verifies Stop runs what was queued before it and later posts are refused.
TEST_F(EventLoopTest, StopRunsQueuedTasksThenRefuses) {
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    loop_->Post([&] { ++ran; });
  }
  loop_->Stop();
  EXPECT_EQ(ran, 100);
  EXPECT_FALSE(loop_->Post([&] { ++ran; }));
  loop_->Stop();  // idempotent
  EXPECT_EQ(ran, 100);
}

}  // namespace
}  // namespace sluice
