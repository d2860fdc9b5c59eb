#include "server/backend/redis_backend.h"
#include "server/backend/script_codec.h"
#include "server/key/storage_key.h"

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "server/common/failure_reason.h"
#include "tests/support/fake_clock.h"
#include "tests/support/algorithm_cases.h"
#include "tests/support/redis_server.h"
#include "tests/support/unshared_status.h"

namespace sluice {
namespace {

using testing::FormatDecision;
using testing::RedisServer;

LimitParams Params(Algorithm algorithm, uint64_t limit, int64_t period_us, uint64_t burst = 0) {
  return LimitParams{algorithm, limit, period_us, burst ? burst : limit};
}

struct Outcome {
  absl::Status status;
  std::vector<Decision> decisions;
};

class RedisBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    backend_ = Make(/*caller_clock=*/true, absl::Seconds(2));
  }

  std::unique_ptr<RedisBackend> Make(bool caller_clock, absl::Duration timeout,
                                     const Clock* clock = nullptr,
                                     KeyLayout layout = KeyLayout::kSluice) {
    RedisBackendOptions options;
    options.client.address = redis_->address();
    options.key_layout = layout;
    options.key_prefix = "rl_";
    options.expiration_jitter = absl::Seconds(300);
    options.timeout = timeout;
    options.use_caller_clock = caller_clock;
    auto backend = RedisBackend::Create(options, clock ? *clock : clock_);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EXPECT_TRUE((*backend)->WaitUntilReady(absl::Seconds(5)));
    return std::move(*backend);
  }

  // A backend on one connection, so that each lane has at most two calls out.
  std::unique_ptr<RedisBackend> MakeOneConnection(
      absl::Duration timeout, const Clock& clock, size_t max_batch = 16,
      absl::Duration queue_grace = absl::Milliseconds(2)) {
    RedisBackendOptions options;
    options.max_batch = max_batch;
    options.client.queue_grace = queue_grace;
    options.client.address = redis_->address();
    options.client.io_threads = 1;
    options.client.connections_per_thread = 1;
    options.timeout = timeout;
    options.use_caller_clock = true;
    auto backend = RedisBackend::Create(options, clock);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EXPECT_TRUE((*backend)->WaitUntilReady(absl::Seconds(5)));
    return std::move(*backend);
  }

  // Starts Evaluate and returns its outcome to come.
  static std::future<Outcome> Start(Backend& backend, std::vector<LimitCheck> checks) {
    auto promise = std::make_shared<std::promise<Outcome>>();
    std::future<Outcome> outcome = promise->get_future();
    backend.Evaluate(checks, [promise](absl::Status status, absl::Span<const Decision> d) {
      promise->set_value(Outcome{testing::UnsharedCopy(status), {d.begin(), d.end()}});
    });
    return outcome;
  }

  static Outcome Run(Backend& backend, std::vector<LimitCheck> checks) {
    std::promise<Outcome> promise;
    backend.Evaluate(checks, [&](absl::Status status, absl::Span<const Decision> d) {
      promise.set_value(Outcome{testing::UnsharedCopy(status), {d.begin(), d.end()}});
    });
    return promise.get_future().get();
  }

  FakeClock clock_{1700006400000000};
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisBackend> backend_;
};

// Verifies every algorithm decides on Redis exactly as the memory backend does, step by step,
// for a mix of hits and times (the Lua scripts, the lone fixed window's INCRBY and the C++ code
// are one behaviour), including a limit of 0 (decided without touching Redis).
TEST_F(RedisBackendTest, AgreesWithMemoryBackendOnEveryAlgorithm) {
  MemoryBackend memory(clock_);
  const int64_t steps[] = {0, 1, 250000, 333333, 999999, 1000000, 1500001, 4000000};
  for (uint64_t limit : {3u, 0u}) {
    for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                        Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                        Algorithm::kLeakyBucket, Algorithm::kGcra}) {
      clock_.SetMicros(1700006400000000);
      LimitParams p = Params(a, limit, 1000000, 4);
      if (a == Algorithm::kFixedWindow || a == Algorithm::kSlidingWindowLog ||
          a == Algorithm::kSlidingWindowCounter) {
        p.burst = p.limit;
      }
      std::string key = absl::StrCat("{agree}", static_cast<int>(a), ":", limit);
      for (int64_t step : steps) {
        clock_.SetMicros(1700006400000000 + step);
        // Refunds too: a lone fixed window's through give_back, the others' through the
        // scripts (with charge 2).
        for (const auto& [hits, refund] : std::initializer_list<std::pair<uint64_t, bool>>{
                 {1, false}, {2, false}, {1, true}, {0, false}, {1, false}, {5, true}}) {
          Outcome redis = Run(*backend_, {LimitCheck{key, p, hits, 0, refund}});
          Outcome mem = Run(memory, {LimitCheck{key, p, hits, 0, refund}});
          ASSERT_TRUE(redis.status.ok()) << redis.status;
          const Decision& r = redis.decisions[0];
          const Decision& m = mem.decisions[0];
          SCOPED_TRACE(absl::StrCat(AlgorithmName(a), " limit ", limit, " t+", step,
                                    refund ? " refund " : " hits ", hits));
          EXPECT_EQ(r.allowed, m.allowed);
          EXPECT_EQ(r.remaining, m.remaining);
          EXPECT_EQ(r.retry_after_us, m.retry_after_us);
          EXPECT_EQ(r.reset_after_us, m.reset_after_us);
          EXPECT_EQ(r.delay_us, m.delay_us);
        }
      }
    }
  }
}

// Verifies a refund inside a group (co-located checks) on Redis: applied whatever the group's
// outcome, never denying it, as the memory backend does.
TEST_F(RedisBackendTest, RefundInAGroupIsAppliedWhateverTheOutcome) {
  MemoryBackend memory(clock_);
  const LimitParams full = Params(Algorithm::kTokenBucket, 1, 3'600'000'000, 2);
  const LimitParams window = Params(Algorithm::kFixedWindow, 5, 3'600'000'000, 5);
  for (Backend* backend : {static_cast<Backend*>(backend_.get()), static_cast<Backend*>(&memory)}) {
    SCOPED_TRACE(backend->Name());
    ASSERT_TRUE(Run(*backend, {LimitCheck{"{g}tb", full, 2, 0}}).decisions[0].allowed);
    ASSERT_TRUE(Run(*backend, {LimitCheck{"{g}fw", window, 4, 0}}).decisions[0].allowed);
    // The bucket is empty: the group is denied, yet the window's refund is applied.
    Outcome denied = Run(*backend, {LimitCheck{"{g}tb", full, 1, 7}, LimitCheck{"{g}fw", window, 3, 7, true}});
    ASSERT_TRUE(denied.status.ok()) << denied.status;
    EXPECT_FALSE(denied.decisions[0].allowed);
    EXPECT_TRUE(denied.decisions[1].allowed);
    EXPECT_EQ(denied.decisions[1].remaining, 4u);
    // A refund of the bucket beside a charge of the window: the group passes.
    Outcome passes = Run(*backend, {LimitCheck{"{g}tb", full, 1, 7, true}, LimitCheck{"{g}fw", window, 1, 7}});
    ASSERT_TRUE(passes.status.ok()) << passes.status;
    EXPECT_TRUE(passes.decisions[0].allowed);
    EXPECT_EQ(passes.decisions[0].remaining, 1u);
    EXPECT_TRUE(passes.decisions[1].allowed);
    EXPECT_EQ(passes.decisions[1].remaining, 3u);
    EXPECT_TRUE(Run(*backend, {LimitCheck{"{g}tb", full, 1, 0}}).decisions[0].allowed);
    clock_.AdvanceMicros(3'600'000'000);  // the next backend starts on fresh keys
  }
}

// Verifies a Backend caller may ask any hits, up to 2^64 - 1, in every call shape (a lane, a
// request's batch, a group, the lone fixed window's INCRBY, charging if admitted or always): Redis
// decides as the memory backend does, and never fails for the arguments (the scripts take
// hits below 2^53 only, INCRBY below 2^63).
TEST_F(RedisBackendTest, HugeHitsAreDecidedAsTheMemoryBackendDecidesThem) {
  MemoryBackend memory(clock_);
  const uint64_t huge[] = {4, uint64_t{1} << 53, uint64_t{1} << 63, ~uint64_t{0}};
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                      Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                      Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    for (Charge charge : {Charge::kIfAdmitted, Charge::kAlways}) {
      LimitParams p = Params(a, 3, 1000000, 3);
      p.charge = charge;
      const std::string key =
          absl::StrCat("{huge}", static_cast<int>(a), ":", ChargeName(charge));
      const std::string other = key + ":other";
      for (uint64_t hits : huge) {
        SCOPED_TRACE(absl::StrCat(AlgorithmName(a), " hits ", hits, " charge ",
                                  ChargeName(charge)));
        // A lone check, two lone checks of one request, and a group.
        const std::vector<std::vector<LimitCheck>> shapes = {
            {LimitCheck{key, p, hits, 0}},
            {LimitCheck{key, p, 1, 0}, LimitCheck{other, p, hits, 1}},
            {LimitCheck{key, p, 1, 0}, LimitCheck{other, p, hits, 0}},
        };
        for (const auto& checks : shapes) {
          Outcome redis = Run(*backend_, checks);
          Outcome mem = Run(memory, checks);
          ASSERT_TRUE(redis.status.ok()) << redis.status;
          ASSERT_EQ(redis.decisions.size(), checks.size());
          for (size_t i = 0; i < checks.size(); ++i) {
            EXPECT_EQ(FormatDecision(redis.decisions[i]), FormatDecision(mem.decisions[i])) << i;
          }
          EXPECT_FALSE(redis.decisions.back().allowed);
        }
      }
    }
  }
}

// Verifies a group (the rules of one descriptor) is all-or-nothing on Redis, and that several
// groups of one batch are decided independently.
TEST_F(RedisBackendTest, GroupIsAllOrNothing) {
  LimitParams wide = Params(Algorithm::kTokenBucket, 10, 60000000);
  LimitParams narrow = Params(Algorithm::kFixedWindow, 1, 60000000);
  Outcome first = Run(*backend_, {{"{g}wide", wide, 1, 0}, {"{g}narrow", narrow, 1, 0},
                                  {"{h}alone", narrow, 1, 1}});
  ASSERT_TRUE(first.status.ok()) << first.status;
  ASSERT_EQ(first.decisions.size(), 3u);
  EXPECT_TRUE(first.decisions[0].allowed && first.decisions[1].allowed &&
              first.decisions[2].allowed);
  Outcome second = Run(*backend_, {{"{g}wide", wide, 1, 0}, {"{g}narrow", narrow, 1, 0}});
  EXPECT_FALSE(second.decisions[1].allowed);
  Outcome peek = Run(*backend_, {{"{g}wide", wide, 0, 0}});
  EXPECT_EQ(peek.decisions[0].remaining, 9u);
}

// The calls of `command` since the last CONFIG RESETSTAT (INFO commandstats).
int64_t CommandCalls(RedisServer& redis, const std::string& command) {
  auto info = redis.Command({"INFO", "commandstats"});
  EXPECT_TRUE(info.ok()) << info.status();
  const std::string field = absl::StrCat("cmdstat_", command, ":calls=");
  const size_t at = info.ok() ? info->find(field) : std::string::npos;
  return at == std::string::npos ? 0 : std::stoll(info->substr(at + field.size()));
}

// Verifies that the lone checks of one algorithm in a request (several descriptors) are decided
// by one batch script call, in order (a key repeated in the request sees the first check's
// write), interleaved with a group, a lone fixed window and another algorithm's checks, and
// that every decision is the memory backend's, reported in check order.
TEST_F(RedisBackendTest, LoneChecksOfOneAlgorithmShareOneScriptCall) {
  MemoryBackend memory(clock_);
  const LimitParams tb = Params(Algorithm::kTokenBucket, 3, 1000000, 4);
  const LimitParams gcra = Params(Algorithm::kGcra, 2, 1000000, 2);
  const LimitParams swc = Params(Algorithm::kSlidingWindowCounter, 5, 1000000);
  // Never denied here, so no give_back call.
  const LimitParams fw = Params(Algorithm::kFixedWindow, 10, 1000000);
  const std::vector<LimitCheck> checks = {
      {"{m}tb_a", tb, 2, 0},    {"{m}fw", fw, 1, 1},        {"{m}gcra_x", gcra, 1, 2},
      {"{m}tb_b", tb, 1, 3},    {"{m}group_tb", tb, 1, 4},  {"{m}group_swc", swc, 1, 4},
      {"{m}tb_a", tb, 2, 5},    {"{m}gcra_y", gcra, 2, 6},
  };
  ASSERT_TRUE(redis_->Command({"CONFIG", "RESETSTAT"}).ok());
  for (int64_t step : {0, 1, 300000, 300000, 999999, 2500000}) {
    clock_.SetMicros(1700006400000000 + step);
    Outcome redis = Run(*backend_, checks);
    Outcome mem = Run(memory, checks);
    ASSERT_TRUE(redis.status.ok()) << redis.status;
    ASSERT_EQ(redis.decisions.size(), checks.size());
    for (size_t i = 0; i < checks.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("t+", step, " check ", i, " ", checks[i].key));
      EXPECT_EQ(FormatDecision(redis.decisions[i]), FormatDecision(mem.decisions[i]));
    }
  }
  // Per request: token_bucket_batch (tb_a, tb_b, tb_a), gcra_batch (x, y) and the group; the
  // fixed window as INCRBY + PEXPIRE.
  EXPECT_EQ(CommandCalls(*redis_, "evalsha"), 6 * 3);
  EXPECT_EQ(CommandCalls(*redis_, "incrby"), 6);
}

// Verifies that a lone check with a limit of 0 (a rule that blocks everything) is decided
// without Redis, for every algorithm: hits 0 admitted, any other denied, and no command sent.
TEST_F(RedisBackendTest, LimitZeroNeedsNoRedis) {
  ASSERT_TRUE(redis_->Command({"CONFIG", "RESETSTAT"}).ok());
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                      Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                      Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    const LimitParams zero = Params(a, 0, 1000000, 0);
    Outcome o = Run(*backend_, {{"{zero}a", zero, 1, 0}, {"{zero}b", zero, 0, 1}});
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_FALSE(o.decisions[0].allowed) << AlgorithmName(a);
    EXPECT_EQ(o.decisions[0].retry_after_us, 1000000) << AlgorithmName(a);
    EXPECT_TRUE(o.decisions[1].allowed) << AlgorithmName(a);
  }
  for (const char* command : {"evalsha", "incrby", "get"}) {
    EXPECT_EQ(CommandCalls(*redis_, command), 0) << command;
  }
}

// Verifies that lone checks of different requests which wait in their algorithm's lane (its
// calls are all out) leave together as one batch call when a call returns, in the order they
// came: twelve requests for one token bucket of three make two calls that hang on a paused
// Redis, then one call for the other ten; the first three requests are admitted, in order.
TEST_F(RedisBackendTest, LaneSendsWaitingChecksOfManyRequestsAsOneCall) {
  auto backend = MakeOneConnection(absl::Seconds(10), clock_);
  const LimitParams tb = Params(Algorithm::kTokenBucket, 3, 60000000, 3);
  ASSERT_TRUE(redis_->Command({"CONFIG", "RESETSTAT"}).ok());
  redis_->Pause();
  std::vector<std::future<Outcome>> outcomes;
  for (int i = 0; i < 12; ++i) {
    outcomes.push_back(Start(*backend, {LimitCheck{"{lane}hot", tb, 1, 0}}));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  redis_->Resume();
  for (int i = 0; i < 12; ++i) {
    Outcome o = outcomes[static_cast<size_t>(i)].get();
    ASSERT_TRUE(o.status.ok()) << i << ": " << o.status;
    ASSERT_EQ(o.decisions.size(), 1u);
    EXPECT_EQ(o.decisions[0].allowed, i < 3) << i;
    EXPECT_EQ(o.decisions[0].remaining, static_cast<uint64_t>(i < 3 ? 2 - i : 0)) << i;
  }
  EXPECT_EQ(CommandCalls(*redis_, "evalsha"), 3);
  EXPECT_EQ(CommandCalls(*redis_, "get"), 12);
  std::string metrics;
  backend->AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("sluice_redis_lane_calls_total{algorithm=\"token_bucket\"} 3\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_redis_lane_checks_total{algorithm=\"token_bucket\"} 12\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_redis_lane_calls_total{algorithm=\"gcra\"} 0\n"),
            std::string::npos)
      << metrics;
}

// Verifies that time waiting in a lane is not charged to Redis' budget up to the queue grace, and
// no further: of ten requests to a hung Redis, two leave at once and fail at their deadline (one
// budget); the other eight waited that long in the lane, are then sent (not failed unsent), and
// fail in flight at their budget plus the grace, the most any check waits.
TEST_F(RedisBackendTest, WaitingInALaneIsNotChargedToRedisUpToTheGrace) {
  auto backend = MakeOneConnection(absl::Milliseconds(300), RealClock::Get(), 16,
                                   /*queue_grace=*/absl::Milliseconds(150));
  const LimitParams tb = Params(Algorithm::kTokenBucket, 3, 60000000, 3);
  redis_->Pause();
  auto begin = std::chrono::steady_clock::now();
  std::vector<std::future<Outcome>> outcomes;
  for (int i = 0; i < 10; ++i) {
    outcomes.push_back(Start(*backend, {LimitCheck{absl::StrCat("{budget}", i), tb, 1, 0}}));
  }
  for (auto& outcome : outcomes) {
    Outcome o = outcome.get();
    EXPECT_EQ(o.status.code(), absl::StatusCode::kDeadlineExceeded) << o.status;
    EXPECT_EQ(FailureReasonOf(o.status), FailureReason::kTimeoutInFlight) << o.status;
  }
  auto took = std::chrono::steady_clock::now() - begin;
  redis_->Resume();
  // Budget plus grace (450 ms): the waiting checks were sent with the grace's worth more
  // time. Under two budgets: the wait is bounded by the grace, not by another budget.
  EXPECT_GE(took, std::chrono::milliseconds(440));
  EXPECT_LT(took, std::chrono::milliseconds(590));
}

// Verifies that full lane calls (max_batch checks) leave at once however many calls are out,
// and that every check is decided: with max_batch 2 and Redis paused, nine requests make five
// calls (the first two alone, then three full pairs), and the ninth check waits until fewer
// than two calls are out, then leaves alone.
TEST_F(RedisBackendTest, FullLaneCallsLeaveAtOnce) {
  auto backend = MakeOneConnection(absl::Seconds(10), clock_, /*max_batch=*/2);
  const LimitParams tb = Params(Algorithm::kTokenBucket, 100, 60000000, 100);
  ASSERT_TRUE(redis_->Command({"CONFIG", "RESETSTAT"}).ok());
  redis_->Pause();
  std::vector<std::future<Outcome>> outcomes;
  for (int i = 0; i < 9; ++i) {
    outcomes.push_back(Start(*backend, {LimitCheck{absl::StrCat("{full}", i), tb, 1, 0}}));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  redis_->Resume();
  for (auto& outcome : outcomes) {
    Outcome o = outcome.get();
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_TRUE(o.decisions[0].allowed);
  }
  EXPECT_EQ(CommandCalls(*redis_, "evalsha"), 6);
  EXPECT_EQ(CommandCalls(*redis_, "get"), 9);
}

// Verifies SCRIPT FLUSH (as after a failover) costs no failed decision.
TEST_F(RedisBackendTest, ScriptFlushIsHealed) {
  LimitParams p = Params(Algorithm::kGcra, 100, 1000000);
  ASSERT_TRUE(Run(*backend_, {{"{f}k", p, 1, 0}}).status.ok());
  ASSERT_TRUE(redis_->Command({"SCRIPT", "FLUSH"}).ok());
  for (int i = 0; i < 10; ++i) {
    Outcome o = Run(*backend_, {{"{f}k", p, 1, 0}, {"{f}k2", p, 1, 1}});
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_TRUE(o.decisions[0].allowed);
  }
}

// Verifies a hung Redis answers kDeadlineExceeded within the budget, not later.
TEST_F(RedisBackendTest, HungRedisMissesTheBudget) {
  // Deadlines run on the real clock here: the fake one would never let the budget expire.
  auto fast = Make(false, absl::Milliseconds(20), &RealClock::Get());
  redis_->Pause();
  auto begin = std::chrono::steady_clock::now();
  Outcome o = Run(*fast, {{"{p}k", Params(Algorithm::kFixedWindow, 5, 1000000), 1, 0}});
  auto took = std::chrono::steady_clock::now() - begin;
  redis_->Resume();
  EXPECT_EQ(o.status.code(), absl::StatusCode::kDeadlineExceeded) << o.status;
  EXPECT_LT(took, std::chrono::milliseconds(500));
}

// Verifies Redis' clock mode: decisions are made on Redis' clock (sampled with TIME), not on the
// process's, however far apart the two are; a fixed window still counts.
TEST_F(RedisBackendTest, RedisClockMode) {
  auto backend = Make(false, absl::Seconds(2));  // clock_ is years behind Redis' clock
  absl::StatusOr<std::string> time = redis_->Command({"TIME"});  // "seconds\nmicroseconds"
  ASSERT_TRUE(time.ok()) << time.status();
  const size_t newline = time->find('\n');
  ASSERT_NE(newline, std::string::npos);
  const int64_t redis_now = std::stoll(time->substr(0, newline)) * 1'000'000 +
                            std::stoll(time->substr(newline + 1));
  EXPECT_NEAR(static_cast<double>(backend->NowMicros()), static_cast<double>(redis_now), 50'000.0);

  LimitParams p = Params(Algorithm::kFixedWindow, 2, 3600000000);
  EXPECT_TRUE(Run(*backend, {{"{t}k", p, 1, 0}}).decisions[0].allowed);
  EXPECT_TRUE(Run(*backend, {{"{t}k", p, 1, 0}}).decisions[0].allowed);
  Outcome third = Run(*backend, {{"{t}k", p, 1, 0}});
  EXPECT_FALSE(third.decisions[0].allowed);
  EXPECT_GT(third.decisions[0].retry_after_us, 0);
  EXPECT_LE(third.decisions[0].retry_after_us, 3600000000);
}

// Verifies a fixed window counts once whether its rule is decided alone (INCRBY, no script) or
// in a group (the group script): both use the window's key and its plain count.
TEST_F(RedisBackendTest, LoneAndGroupedFixedWindowShareOneCount) {
  LimitParams window = Params(Algorithm::kFixedWindow, 3, 60000000);
  LimitParams wide = Params(Algorithm::kTokenBucket, 100, 60000000);
  EXPECT_TRUE(Run(*backend_, {{"{s}fw", window, 1, 0}}).decisions[0].allowed);
  Outcome grouped = Run(*backend_, {{"{s}fw", window, 1, 0}, {"{s}tb", wide, 1, 0}});
  ASSERT_TRUE(grouped.status.ok()) << grouped.status;
  EXPECT_TRUE(grouped.decisions[0].allowed);
  EXPECT_EQ(grouped.decisions[0].remaining, 1u);
  Outcome third = Run(*backend_, {{"{s}fw", window, 1, 0}});
  EXPECT_TRUE(third.decisions[0].allowed);
  EXPECT_EQ(third.decisions[0].remaining, 0u);
  Outcome full = Run(*backend_, {{"{s}fw", window, 1, 0}, {"{s}tb", wide, 1, 0}});
  EXPECT_FALSE(full.decisions[0].allowed);
  // A new window starts from zero.
  clock_.AdvanceMicros(60000000);
  EXPECT_TRUE(Run(*backend_, {{"{s}fw", window, 3, 0}}).decisions[0].allowed);
}

// Verifies a denied lone fixed window gives its hits back: a request too big for what is left
// does not use up the window for smaller ones, as in the memory backend. The key keeps a TTL.
TEST_F(RedisBackendTest, DeniedLoneFixedWindowGivesHitsBack) {
  LimitParams window = Params(Algorithm::kFixedWindow, 3, 60000000);
  EXPECT_TRUE(Run(*backend_, {{"{b}fw", window, 2, 0}}).decisions[0].allowed);
  Outcome denied = Run(*backend_, {{"{b}fw", window, 2, 0}});
  EXPECT_FALSE(denied.decisions[0].allowed);
  EXPECT_EQ(denied.decisions[0].remaining, 1u);
  // The give-back is sent after the reply, possibly on another connection: wait for it.
  std::string key;
  AppendFixedWindowKey("{b}fw", window, clock_.NowMicros(), &key);
  std::string count;
  for (int i = 0; i < 200 && count != "2"; ++i) {
    absl::StatusOr<std::string> value = redis_->Command({"GET", key});
    count = value.ok() ? *value : "";
    if (count != "2") absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(count, "2");
  absl::StatusOr<std::string> ttl = redis_->Command({"PTTL", key});
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GT(std::stoll(*ttl), 0);
  EXPECT_LE(std::stoll(*ttl), 60000);
  Outcome small = Run(*backend_, {{"{b}fw", window, 1, 0}});
  EXPECT_TRUE(small.decisions[0].allowed);
  EXPECT_EQ(small.decisions[0].remaining, 0u);
}

// Verifies a partial check (a lease call) of a lone fixed window: when its hits do not all fit,
// the part that does is granted (Decision::granted) and only the rest given back, so that the
// count settles at the limit; an ordinary check of the same size is denied whole, and a partial
// check of a full window is denied and leaves the count where it was.
TEST_F(RedisBackendTest, PartialLoneFixedWindowTakesWhatFits) {
  const LimitParams window = Params(Algorithm::kFixedWindow, 10, 60'000'000);
  std::string key;
  AppendFixedWindowKey("{p}fw", window, clock_.NowMicros(), &key);
  const auto count_settles_at = [&](const std::string& want) {
    std::string count;
    for (int i = 0; i < 200 && count != want; ++i) {
      absl::StatusOr<std::string> value = redis_->Command({"GET", key});
      count = value.ok() ? *value : "";
      if (count != want) absl::SleepFor(absl::Milliseconds(5));
    }
    return count;
  };
  ASSERT_TRUE(Run(*backend_, {{"{p}fw", window, 7, 0}}).decisions[0].allowed);
  Outcome whole = Run(*backend_, {{"{p}fw", window, 5, 0}});
  EXPECT_FALSE(whole.decisions[0].allowed);
  EXPECT_EQ(whole.decisions[0].granted, 0u);
  EXPECT_EQ(count_settles_at("7"), "7");

  LimitCheck partial{"{p}fw", window, 5, 0};
  partial.partial = true;
  Outcome part = Run(*backend_, {partial});
  ASSERT_TRUE(part.status.ok()) << part.status;
  EXPECT_TRUE(part.decisions[0].allowed);
  EXPECT_EQ(part.decisions[0].granted, 3u);
  EXPECT_EQ(part.decisions[0].remaining, 0u);
  EXPECT_EQ(count_settles_at("10"), "10");

  Outcome full = Run(*backend_, {partial});
  EXPECT_FALSE(full.decisions[0].allowed);
  EXPECT_EQ(full.decisions[0].granted, 0u);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(count_settles_at("10"), "10");
}

// Verifies Charge::kAlways on a lone fixed window: a denied request keeps its hits counted, as
// envoyproxy/ratelimit's increment-first does, and so does memory.
TEST_F(RedisBackendTest, ChargeAlwaysLoneFixedWindowKeepsHits) {
  LimitParams window = Params(Algorithm::kFixedWindow, 3, 60000000);
  window.charge = Charge::kAlways;
  EXPECT_TRUE(Run(*backend_, {{"{c}fw", window, 2, 0}}).decisions[0].allowed);
  EXPECT_FALSE(Run(*backend_, {{"{c}fw", window, 2, 0}}).decisions[0].allowed);
  std::string key;
  AppendFixedWindowKey("{c}fw", window, clock_.NowMicros(), &key);
  absl::StatusOr<std::string> count = redis_->Command({"GET", key});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, "4");
  EXPECT_FALSE(Run(*backend_, {{"{c}fw", window, 1, 0}}).decisions[0].allowed);

  MemoryBackend memory(clock_);
  EXPECT_TRUE(Run(memory, {{"{c}fw", window, 2, 0}}).decisions[0].allowed);
  EXPECT_FALSE(Run(memory, {{"{c}fw", window, 2, 0}}).decisions[0].allowed);
  EXPECT_FALSE(Run(memory, {{"{c}fw", window, 1, 0}}).decisions[0].allowed);
}

// Verifies a group (all-or-nothing) with a check that charges always: that check is charged
// whatever the group's outcome, the others only when the whole group is admitted; Redis decides
// each step as the memory backend does.
TEST_F(RedisBackendTest, GroupChargesItsAlwaysChecksWhateverTheOutcome) {
  MemoryBackend memory(clock_);
  LimitParams budget = Params(Algorithm::kTokenBucket, 1000, 86'400'000'000, 5);
  budget.charge = Charge::kAlways;
  const LimitParams window = Params(Algorithm::kFixedWindow, 2, 60'000'000);
  struct Step {
    uint64_t hits;
    bool budget_allowed;
    uint64_t budget_remaining;
    bool window_allowed;
    uint64_t window_remaining;
  };
  // The window's second request fills it; the third (1 hit) is denied by the window, yet the
  // budget is charged; then 3 hits are more than the budget's 2 left: both deny, the budget goes
  // into debt (-1) and the window is not charged; a check (0 hits) then fails on the budget.
  const Step steps[] = {
      {2, true, 3, true, 0},  {1, true, 2, false, 0}, {0, true, 2, true, 0},
      {3, false, 0, false, 0}, {0, false, 0, true, 0},
  };
  clock_.SetMicros(1700006400000000);
  for (Backend* backend : {static_cast<Backend*>(backend_.get()), static_cast<Backend*>(&memory)}) {
    for (size_t i = 0; i < std::size(steps); ++i) {
      SCOPED_TRACE(absl::StrCat(backend == &memory ? "memory" : "redis", " step ", i));
      const Step& step = steps[i];
      Outcome outcome = Run(*backend, {{"{g}budget", budget, step.hits, 7},
                                       {"{g}window", window, step.hits, 7}});
      ASSERT_TRUE(outcome.status.ok()) << outcome.status;
      EXPECT_EQ(outcome.decisions[0].allowed, step.budget_allowed);
      EXPECT_EQ(outcome.decisions[0].remaining, step.budget_remaining);
      EXPECT_EQ(outcome.decisions[1].allowed, step.window_allowed);
      EXPECT_EQ(outcome.decisions[1].remaining, step.window_remaining);
    }
  }
}

// Waits until the value at `key` is `want` (a give-back is sent after the reply, possibly on
// another connection), and returns the last value read.
std::string WaitForValue(RedisServer& redis, const std::string& key, const std::string& want) {
  std::string value;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<std::string> read = redis.Command({"GET", key});
    value = read.ok() ? *read : "";
    if (value == want) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return value;
}

// Verifies --redis_key_layout=upstream: a lone fixed window counts in envoyproxy/ratelimit's key
// (<prefix><domain>_<key>_<value>_<window start>), with upstream's TTL (the unit, plus up to the
// jitter), and counts what upstream's replicas write there (its INCRBY), so both count one window
// in one counter.
TEST_F(RedisBackendTest, UpstreamLayoutSharesUpstreamsCounter) {
  std::unique_ptr<RedisBackend> backend =
      Make(/*caller_clock=*/true, absl::Seconds(2), nullptr, KeyLayout::kUpstream);
  const LimitParams window = Params(Algorithm::kFixedWindow, 4, 60'000'000);
  const std::string storage = "rl_{edge|user=u}fw:60";
  const std::string upstream =
      absl::StrCat("rl_edge_user_u_", clock_.NowMicros() / 60'000'000 * 60);
  Outcome first = Run(*backend, {{storage, window, 1, 0}});
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_TRUE(first.decisions[0].allowed);
  EXPECT_EQ(first.decisions[0].at_us, clock_.NowMicros());
  absl::StatusOr<std::string> count = redis_->Command({"GET", upstream});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, "1");
  absl::StatusOr<std::string> ttl = redis_->Command({"TTL", upstream});
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GE(std::stoll(*ttl), 59);
  EXPECT_LT(std::stoll(*ttl), 60 + 300);
  // An upstream replica's two requests (fixed_cache_impl.go: INCRBY, then EXPIRE).
  ASSERT_TRUE(redis_->Command({"INCRBY", upstream, "2"}).ok());
  Outcome fourth = Run(*backend, {{storage, window, 1, 0}});
  EXPECT_TRUE(fourth.decisions[0].allowed);
  EXPECT_EQ(fourth.decisions[0].remaining, 0u);
  EXPECT_FALSE(Run(*backend, {{storage, window, 1, 0}}).decisions[0].allowed);
  EXPECT_EQ(WaitForValue(*redis_, upstream, "4"), "4");
  // Sluice's own layout never touches it.
  Outcome own = Run(*backend_, {{storage, window, 1, 0}});
  EXPECT_TRUE(own.decisions[0].allowed);
  EXPECT_EQ(own.decisions[0].remaining, 3u);
}

// Verifies two checks of one window key in one request (two overrides of different limits on
// one descriptor share upstream's key) decide as if each saw the other's state: with 2 counted,
// [2/minute, 4/minute] is denied then admitted with 1 remaining, and so is the reverse order;
// Redis holds 3 either way (the denied hit is given back).
TEST_F(RedisBackendTest, OneWindowTwiceInARequestCountsWhatIsGivenBack) {
  std::unique_ptr<RedisBackend> backend =
      Make(/*caller_clock=*/true, absl::Seconds(2), nullptr, KeyLayout::kUpstream);
  const LimitParams two = Params(Algorithm::kFixedWindow, 2, 60'000'000);
  const LimitParams four = Params(Algorithm::kFixedWindow, 4, 60'000'000);
  const int64_t start_s = clock_.NowMicros() / 60'000'000 * 60;
  for (bool reversed : {false, true}) {
    SCOPED_TRACE(reversed ? "4/minute first" : "2/minute first");
    const std::string key = reversed ? "rl_{d|m=r}fw:60:l" : "rl_{d|m=b}fw:60:l";
    const std::string upstream = absl::StrCat(reversed ? "rl_d_m_r_" : "rl_d_m_b_", start_s);
    ASSERT_TRUE(redis_->Command({"SET", upstream, "2"}).ok());
    const std::string two_key = key + "2";
    const std::string four_key = key + "4";
    std::vector<LimitCheck> checks = {{two_key, two, 1, 0}, {four_key, four, 1, 1}};
    if (reversed) {
      std::swap(checks[0], checks[1]);
      checks[0].group = 0;
      checks[1].group = 1;
    }
    Outcome outcome = Run(*backend, checks);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const Decision& at_two = outcome.decisions[reversed ? 1 : 0];
    const Decision& at_four = outcome.decisions[reversed ? 0 : 1];
    EXPECT_FALSE(at_two.allowed);
    EXPECT_TRUE(at_four.allowed);
    EXPECT_EQ(at_four.remaining, 1u);
    EXPECT_EQ(WaitForValue(*redis_, upstream, "3"), "3");
  }
}

// Verifies a give-back of a charge (LimitCheck::at_us) goes to the window that took it, and
// gives nothing once that window is over: the next window never holds those hits.
TEST_F(RedisBackendTest, GiveBackGoesToTheWindowThatCharged) {
  const LimitParams window = Params(Algorithm::kFixedWindow, 5, 1'000'000);
  clock_.SetMicros(1700006400'000'000 + 900'000);
  Outcome charged = Run(*backend_, {{"{gb}fw", window, 3, 0}});
  ASSERT_TRUE(charged.decisions[0].allowed);
  LimitCheck give_back{"{gb}fw", window, 3, 0, /*refund=*/true, charged.decisions[0].at_us};
  clock_.AdvanceMicros(50'000);  // the same second
  Outcome same = Run(*backend_, {give_back});
  ASSERT_TRUE(same.status.ok()) << same.status;
  EXPECT_EQ(same.decisions[0].remaining, 5u);
  EXPECT_EQ(Run(*backend_, {{"{gb}fw", window, 3, 0}}).decisions[0].remaining, 2u);
  give_back.at_us = clock_.NowMicros();
  clock_.AdvanceMicros(100'000);  // the next second, which took nothing
  EXPECT_EQ(Run(*backend_, {{"{gb}fw", window, 4, 0}}).decisions[0].remaining, 1u);
  Outcome late = Run(*backend_, {give_back});
  ASSERT_TRUE(late.status.ok()) << late.status;
  EXPECT_EQ(late.decisions[0].remaining, 1u);
}

// Verifies the clock sampler keeps its error small: a sample slower than twice the kept one is
// skipped and the offset stays, a fast one is kept, and after a minute without a kept sample a
// slow one is kept rather than none. Round trips are measured on the fake clock, which the test
// advances while Redis is paused.
TEST_F(RedisBackendTest, ClockSamplerSkipsSlowSamples) {
  RedisBackendOptions options;
  options.client.address = redis_->address();
  options.timeout = absl::Seconds(2);
  options.clock_sync_interval = absl::Seconds(1);
  auto created = RedisBackend::Create(options, clock_);
  ASSERT_TRUE(created.ok()) << created.status();
  RedisBackend& backend = **created;
  ASSERT_TRUE(backend.WaitUntilReady(absl::Seconds(5)));
  ASSERT_EQ(backend.clock_samples().kept, 1u);
  const int64_t offset = backend.NowMicros() - clock_.NowMicros();

  auto wait_for_samples = [&](uint64_t total) {
    for (int i = 0; i < 400; ++i) {
      RedisClockSamples s = backend.clock_samples();
      if (s.kept + s.skipped + s.failed >= total) {
        return;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    ADD_FAILURE() << "no clock sample completed";
  };
  // A sample that takes 20 ms (the kept one took 0 on the fake clock): skipped.
  auto slow_sample = [&] {
    redis_->Pause();
    backend.NowMicros();  // due: sends TIME
    clock_.AdvanceMicros(20'000);
    redis_->Resume();
  };

  clock_.AdvanceMicros(1'000'000);
  slow_sample();
  wait_for_samples(2);
  EXPECT_EQ(backend.clock_samples().skipped, 1u);
  EXPECT_EQ(backend.NowMicros() - clock_.NowMicros(), offset);

  clock_.AdvanceMicros(1'000'000);
  backend.NowMicros();  // a fast sample
  wait_for_samples(3);
  EXPECT_EQ(backend.clock_samples().kept, 2u);

  clock_.AdvanceMicros(61'000'000);
  slow_sample();
  wait_for_samples(4);
  EXPECT_EQ(backend.clock_samples().kept, 3u);
  EXPECT_EQ(backend.clock_samples().failed, 0u);

  std::string metrics;
  backend.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("sluice_redis_clock_samples_total{result=\"kept\"} 3\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_redis_clock_samples_total{result=\"skipped\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("# TYPE sluice_redis_clock_offset_microseconds gauge\n"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice
