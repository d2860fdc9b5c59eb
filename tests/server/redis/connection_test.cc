#include "server/redis/connection.h"

#include <condition_variable>
#include <memory>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/notification.h"
#include "server/common/clock.h"
#include "server/common/failure_reason.h"
#include "tests/support/fake_clock.h"
#include "tests/support/redis_server.h"
#include "tests/support/unshared_status.h"

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

// Verifies time a batch waits for the loop thread is not charged to Redis up to the queue
// grace: held up past its deadline by less than the grace, it is still sent and answered; held
// up longer, it fails unsent, with FailureReason::kTimeoutBeforeSend.
TEST_F(RedisConnectionTest, WaitingForTheLoopIsNotChargedToRedisUpToTheGrace) {
  FakeClock clock;
  StartConnection({.stall_timeout_us = 0, .caller_write_horizon_us = 0, .queue_grace_us = 5000},
                  clock);
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  const auto submit_while_loop_busy = [&](int64_t wait_us) {
    Notification loop_held;
    Notification release;
    loop_->Post([&] {
      loop_held.Notify();
      release.WaitForNotification();
    });
    loop_held.WaitForNotification();
    Notification done;
    absl::Status status;
    connection_->Submit(CommandBatch().Add({"PING"}), clock.MonotonicMicros() + 20000,
                        [&](absl::Status s, absl::Span<RedisReply>) {
                          status = testing::UnsharedCopy(s);
                          done.Notify();
                        });
    clock.AdvanceMicros(wait_us);
    release.Notify();
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    return status;
  };
  // Waited 23 ms on a 20 ms budget with a 5 ms grace; the injected clock then stands still, so
  // the batch is answered only if the wait moved its deadline.
  EXPECT_TRUE(submit_while_loop_busy(23000).ok());
  absl::Status late = submit_while_loop_busy(26000);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_EQ(FailureReasonOf(late), FailureReason::kTimeoutBeforeSend) << late;
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

// Verifies every batch meets its own deadline, also one written after another due later: the
// connection's one deadline timer comes forward for it, and then goes on to the later one.
TEST_F(RedisConnectionTest, EachBatchExpiresAtItsOwnDeadline) {
  FakeClock clock;
  // No queue grace: the deadlines stay exactly as submitted, whichever thread writes the batch.
  StartConnection({.stall_timeout_us = 0, .queue_grace_us = 0}, clock);
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  server_->Pause();
  Notification late_done, early_done;
  absl::Status late_status, early_status;
  const int64_t start = clock.MonotonicMicros();
  connection_->Submit(CommandBatch().Add({"PING"}), start + 300000,
                      [&](absl::Status s, absl::Span<RedisReply>) {
                        late_status = s;
                        late_done.Notify();
                      });
  connection_->Submit(CommandBatch().Add({"PING"}), start + 50000,
                      [&](absl::Status s, absl::Span<RedisReply>) {
                        early_status = s;
                        early_done.Notify();
                      });
  clock.AdvanceMicros(50000);
  ASSERT_TRUE(early_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(early_status.code(), absl::StatusCode::kDeadlineExceeded) << early_status;
  EXPECT_FALSE(late_done.WaitForNotificationWithTimeout(absl::Milliseconds(400)))
      << "the later batch expired with the earlier one";
  clock.AdvanceMicros(250000);
  ASSERT_TRUE(late_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(late_status.code(), absl::StatusCode::kDeadlineExceeded) << late_status;
  EXPECT_EQ(connection_->stats().deadline_exceeded, 2u);
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

// Runs `batch` on the connection from the calling thread and waits for its callback.
struct Outcome {
  absl::Status status;
  std::vector<RedisReply> replies;
};

Outcome SubmitAndWait(RedisConnection& connection, CommandBatch batch, int64_t deadline_us) {
  auto outcome = std::make_shared<Outcome>();
  auto done = std::make_shared<Notification>();
  connection.Submit(std::move(batch), deadline_us,
                    [outcome, done](absl::Status status, absl::Span<RedisReply> replies) {
                      outcome->status = std::move(status);
                      outcome->replies.assign(replies.begin(), replies.end());
                      done->Notify();
                    });
  EXPECT_TRUE(done->WaitForNotificationWithTimeout(absl::Seconds(30)));
  return *outcome;
}

// Verifies that a batch submitted to an idle connection is written by the submitting thread:
// the loop wakes for the replies only, never for posted work, and every reply is right. With
// the horizon at 0 every batch wakes the loop instead.
TEST_F(RedisConnectionTest, IdleConnectionIsWrittenByTheCaller) {
  for (int64_t horizon_us : {int64_t{1000000}, int64_t{0}}) {
    SCOPED_TRACE(horizon_us);
    std::string key = absl::StrCat("idle", horizon_us);
    StartConnection({.caller_write_horizon_us = horizon_us}, RealClock::Get());
    ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
    constexpr int kBatches = 40;
    uint64_t wakeups_before = loop_->wakeups();
    for (int i = 1; i <= kBatches; ++i) {
      // The loop holds the connection while it finishes the previous reply; let it.
      absl::SleepFor(absl::Milliseconds(1));
      Outcome outcome =
          SubmitAndWait(*connection_, CommandBatch().Add({"INCR", key}),
                        RealClock::Get().MonotonicMicros() + 10000000);
      ASSERT_TRUE(outcome.status.ok()) << outcome.status;
      ASSERT_EQ(outcome.replies.size(), 1u);
      EXPECT_EQ(outcome.replies[0].integer(), i);
    }
    uint64_t wakeups = loop_->wakeups() - wakeups_before;
    if (horizon_us > 0) {
      EXPECT_GE(connection_->stats().caller_writes, uint64_t{kBatches - 2});
      EXPECT_LE(wakeups, 2u);
    } else {
      EXPECT_EQ(connection_->stats().caller_writes, 0u);
      EXPECT_GE(wakeups, uint64_t{kBatches});
    }
    OnLoop([&] { connection_.reset(); });
  }
}

// Verifies that a batch written by its caller to a server that never answers still fails at
// its deadline (the loop adopts it and arms its timer), and that the stall watch covers it.
TEST_F(RedisConnectionTest, CallerWrittenBatchMeetsItsDeadlineAndStallWatch) {
  // The horizon outlasts pausing the server; the stall watch starts when the loop adopts the
  // batch, at the latest one horizon later, and outlasts the deadline.
  StartConnection({.stall_timeout_us = 300000, .caller_write_horizon_us = 200000},
                  RealClock::Get());
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  OnLoop([] {});  // the loop has finished the handshake's read and let go of the connection
  server_->Pause();
  int64_t start = RealClock::Get().MonotonicMicros();
  Outcome outcome = SubmitAndWait(*connection_, CommandBatch().Add({"PING"}), start + 250000);
  int64_t elapsed = RealClock::Get().MonotonicMicros() - start;
  EXPECT_EQ(connection_->stats().caller_writes, 1u);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kDeadlineExceeded) << outcome.status;
  EXPECT_GE(elapsed, 250000);
  EXPECT_LT(elapsed, 500000);
  // Nothing was read since: the stall watch drops the connection.
  ASSERT_TRUE(WaitReady(false, absl::Seconds(5)));
  EXPECT_EQ(connection_->stats().disconnects, 1u);
  server_->Resume();
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
}

// Verifies that a batch due before the loop's horizon goes through the loop, and is answered.
TEST_F(RedisConnectionTest, BatchDueBeforeTheHorizonGoesThroughTheLoop) {
  StartConnection({.caller_write_horizon_us = 1000000}, RealClock::Get());
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  Outcome outcome = SubmitAndWait(*connection_, CommandBatch().Add({"PING"}),
                                  RealClock::Get().MonotonicMicros() + 500000);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.replies[0].str(), "PONG");
  EXPECT_EQ(connection_->stats().caller_writes, 0u);
}

// Verifies that a batch the loop writes which the socket cannot take at once (Redis paused, a
// value larger than the socket buffers) is finished by the write event once Redis reads again:
// the loop writes what it drained itself and arms the write event only for the rest.
TEST_F(RedisConnectionTest, LoopWriteLargerThanTheSocketBuffersFinishesLater) {
  StartConnection({.caller_write_horizon_us = 0}, RealClock::Get());  // every write by the loop
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  const std::string value(32 << 20, 'v');
  server_->Pause();
  auto outcome = std::make_shared<Outcome>();
  auto done = std::make_shared<Notification>();
  connection_->Submit(CommandBatch().Add({"SET", "big", value}).Add({"STRLEN", "big"}),
                      RealClock::Get().MonotonicMicros() + 60'000'000,
                      [outcome, done](absl::Status status, absl::Span<RedisReply> replies) {
                        outcome->status = std::move(status);
                        outcome->replies.assign(replies.begin(), replies.end());
                        done->Notify();
                      });
  EXPECT_FALSE(done->WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  server_->Resume();
  ASSERT_TRUE(done->WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(outcome->status.ok()) << outcome->status;
  ASSERT_EQ(outcome->replies.size(), 2u);
  EXPECT_EQ(outcome->replies[0].str(), "OK");
  EXPECT_EQ(outcome->replies[1].integer(), int64_t{32} << 20);
  // The connection goes on as before.
  Outcome next = SubmitAndWait(*connection_, CommandBatch().Add({"PING"}),
                               RealClock::Get().MonotonicMicros() + 5'000'000);
  ASSERT_TRUE(next.status.ok()) << next.status;
  EXPECT_EQ(next.replies[0].str(), "PONG");
}

// Verifies that one thread's batches reach Redis in the order submitted although some are
// written by the thread and the rest by the loop: INCR replies count up in submission order.
TEST_F(RedisConnectionTest, CallerAndLoopWritesKeepSubmissionOrder) {
  StartConnection({.caller_write_horizon_us = 1000}, RealClock::Get());
  ASSERT_TRUE(WaitReady(true, absl::Seconds(20)));
  constexpr int kRounds = 100;
  constexpr int kBatches = 50;
  std::vector<int64_t> seen(kRounds * kBatches, 0);
  std::atomic<int> remaining{kRounds * kBatches};
  Notification all_done;
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kBatches; ++i) {
      int index = round * kBatches + i;
      connection_->Submit(CommandBatch().Add({"INCR", "order"}),
                          RealClock::Get().MonotonicMicros() + 10000000,
                          [&, index](absl::Status status, absl::Span<RedisReply> replies) {
                            EXPECT_TRUE(status.ok()) << status;
                            seen[index] = status.ok() ? replies[0].integer() : -1;
                            if (remaining.fetch_sub(1) == 1) {
                              all_done.Notify();
                            }
                          });
    }
    absl::SleepFor(absl::Milliseconds(1));  // let the connection go idle now and then
  }
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(connection_->stats().caller_writes, 1u);
  for (int index = 0; index < kRounds * kBatches; ++index) {
    ASSERT_EQ(seen[index], index + 1) << "batch " << index;
  }
}

}  // namespace
}  // namespace sluice
