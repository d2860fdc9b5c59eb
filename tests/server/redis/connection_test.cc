#include "server/redis/connection.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/notification.h"
#include "server/common/clock.h"
#include "server/common/fake_clock.h"
#include "tests/support/redis_server.h"

namespace sluice {
namespace {

using testing::Notification;

using testing::RedisServer;

// Drives one RedisConnection on its own loop, the way RedisClient does.
class RedisConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    loop_ = *EventLoop::Create("conn-test");
    scripts_ = std::make_shared<ScriptCache>();
  }

  void TearDown() override {
    if (connection_ != nullptr) {
      OnLoop([&] { connection_.reset(); });
    }
    loop_.reset();
  }

  // Runs `work` on the loop thread and waits for it.
  void OnLoop(absl::AnyInvocable<void()> work) {
    Notification done;
    loop_->Post([&] {
      work();
      done.Notify();
    });
    done.WaitForNotification();
  }

  void StartConnection(RedisConnectionOptions options, const Clock& clock) {
    options.host = "127.0.0.1";
    options.port = server_->port();
    OnLoop([&] {
      connection_ = std::make_unique<RedisConnection>(*loop_, options, clock, scripts_,
                                                      DefaultRandom(), [this](bool ready) {
                                                        std::lock_guard<std::mutex> lock(mu_);
                                                        ready_ = ready;
                                                        ready_changed_.notify_all();
                                                      });
      connection_->Start();
    });
  }

  bool WaitReady(bool ready, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return ready_changed_.wait_for(
        lock, absl::ToChronoMicroseconds(timeout),
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_ == ready; });
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<EventLoop> loop_;
  std::shared_ptr<ScriptCache> scripts_;
  std::unique_ptr<RedisConnection> connection_;
  std::mutex mu_;
  std::condition_variable ready_changed_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
};

// Verifies a server that accepts TCP but never answers (paused) trips the connect timeout, and
// that retries with backoff connect once it answers again.
TEST_F(RedisConnectionTest, ConnectTimeoutThenRetryUntilServerAnswers) {
  server_->Pause();
  StartConnection({.connect_timeout_us = 100000, .backoff_min_us = 10000, .backoff_max_us = 50000},
                  RealClock::Get());
  EXPECT_FALSE(WaitReady(true, absl::Milliseconds(500)));
  EXPECT_FALSE(connection_->ready());
  EXPECT_EQ(connection_->stats().connects, 0u);
  server_->Resume();
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  EXPECT_TRUE(connection_->ready());
  EXPECT_EQ(connection_->stats().connects, 1u);
}

// Verifies a dropped connection reports not-ready, fails batches fast, and reconnects.
TEST_F(RedisConnectionTest, ReportsReadinessAcrossRestart) {
  StartConnection({.backoff_min_us = 10000, .backoff_max_us = 100000}, RealClock::Get());
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  server_->Kill();
  ASSERT_TRUE(WaitReady(false, absl::Seconds(20)));
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  EXPECT_EQ(connection_->stats().connects, 2u);
  EXPECT_EQ(connection_->stats().disconnects, 1u);
}

// Verifies deadlines are measured on the injected clock: a batch does not expire while the
// clock stands still, and expires once the clock passes its deadline.
TEST_F(RedisConnectionTest, DeadlinesFollowTheInjectedClock) {
  FakeClock clock;
  StartConnection({.stall_timeout_us = 0}, clock);
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  server_->Pause();
  Notification done;
  absl::Status status;
  connection_->Submit(CommandBatch().Add({"PING"}), clock.MonotonicMicros() + 20000,
                      [&](absl::Status s, absl::Span<RedisReply>) {
                        status = s;
                        done.Notify();
                      });
  // 20 ms of real time pass many times over, but not on the injected clock.
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  clock.AdvanceMicros(20000);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  server_->Resume();
  OnLoop([&] { connection_.reset(); });  // before `clock` goes
}

// Verifies Submit after Close fails inline, on the caller's stack.
TEST_F(RedisConnectionTest, SubmitAfterCloseFailsInline) {
  StartConnection({}, RealClock::Get());
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  OnLoop([&] { connection_->Close(); });
  bool called = false;
  connection_->Submit(CommandBatch().Add({"PING"}), RealClock::Get().MonotonicMicros() + 1000000,
                      [&](absl::Status s, absl::Span<RedisReply>) {
                        called = true;
                        EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
                      });
  EXPECT_TRUE(called);
}

}  // namespace
}  // namespace sluice
