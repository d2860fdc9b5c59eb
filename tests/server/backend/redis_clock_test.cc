#include "server/backend/redis_clock.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

// A RedisExecutor that holds each batch until the test answers it.
class HeldExecutor final : public RedisExecutor {
 public:
  struct Held {
    CommandBatch batch;
    int64_t deadline_us;
    BatchCallback done;
  };
  void Execute(CommandBatch batch, int64_t deadline_us, BatchCallback done) override {
    held.push_back({std::move(batch), deadline_us, std::move(done)});
  }
  absl::StatusOr<const RedisScript*> RegisterScript(std::string_view, std::string_view) override {
    return absl::UnimplementedError("not in this test");
  }
  bool WaitUntilReady(absl::Duration) override { return true; }
  int ready_connections() const override { return 1; }
  void CollectNodeMetrics(std::vector<NodeMetrics>*) const override {}
  void Stop() override {}

  // Answers the oldest held batch with a TIME reply, or with `status`.
  void AnswerTime(int64_t seconds, int64_t micros) {
    std::vector<RedisReply> replies;
    replies.push_back(RedisReply::Array(
        {RedisReply::String(std::to_string(seconds)), RedisReply::String(std::to_string(micros))}));
    Take()(absl::OkStatus(), absl::MakeSpan(replies));
  }
  void Fail(absl::Status status) { Take()(std::move(status), {}); }

  std::vector<Held> held;

 private:
  BatchCallback Take() {
    BatchCallback done = std::move(held.front().done);
    held.erase(held.begin());
    return done;
  }
};

constexpr int64_t kStart = 1'700'000'000'000'000;

// A clock whose wall time and monotonic time move apart when told: a host whose wall clock is
// stepped (NTP) while its monotonic clock runs on.
class SteppedWallClock final : public Clock {
 public:
  int64_t NowMicros() const override { return wall_; }
  int64_t MonotonicMicros() const override { return monotonic_; }
  void Advance(int64_t us) {
    wall_ += us;
    monotonic_ += us;
  }
  void StepWall(int64_t us) { wall_ += us; }

 private:
  int64_t wall_ = kStart;
  int64_t monotonic_ = 5'000'000;
};

class RedisClockTest : public ::testing::Test {
 protected:
  RedisClockOptions Options() {
    RedisClockOptions options;
    options.sync_interval = absl::Seconds(1);
    options.sample_timeout = absl::Milliseconds(10);
    return options;
  }
  FakeClock clock_{kStart};
  HeldExecutor redis_;
};

// Verifies the first reading sends one TIME, with the sample timeout as its deadline, and that
// until it answers the offset is 0 and the clock is not synced.
TEST_F(RedisClockTest, FirstReadingSamples) {
  RedisClock redis_clock(Options(), clock_, redis_);
  EXPECT_FALSE(redis_clock.synced());
  EXPECT_EQ(redis_clock.NowMicros(), kStart);
  ASSERT_EQ(redis_.held.size(), 1u);
  EXPECT_EQ(redis_.held[0].deadline_us, kStart + 10'000);
  // A second reading while the sample is out sends nothing more.
  redis_clock.NowMicros();
  EXPECT_EQ(redis_.held.size(), 1u);
}

// Verifies the offset assumes Redis read its clock in the middle of the round trip.
TEST_F(RedisClockTest, OffsetFromTheMiddleOfTheRoundTrip) {
  RedisClock redis_clock(Options(), clock_, redis_);
  redis_clock.NowMicros();
  clock_.AdvanceMicros(400);  // the round trip
  // Redis' clock is 5 s ahead: it read kStart + 200 + 5 s.
  redis_.AnswerTime((kStart + 200) / 1'000'000 + 5, (kStart + 200) % 1'000'000);
  EXPECT_TRUE(redis_clock.synced());
  EXPECT_EQ(redis_clock.NowMicros(), clock_.NowMicros() + 5'000'000);
  EXPECT_EQ(redis_clock.samples().kept, 1u);
  std::string metrics;
  redis_clock.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("sluice_redis_clock_offset_microseconds 5000000\n"), std::string::npos);
  EXPECT_NE(metrics.find("sluice_redis_clock_round_trip_microseconds 400\n"), std::string::npos);
}

// Verifies the next sample is due one interval later, a slow one is skipped (the offset stays),
// and a failed one is counted and retried after a tenth of the interval.
TEST_F(RedisClockTest, SkipsSlowSamplesAndRetriesFailedOnes) {
  RedisClock redis_clock(Options(), clock_, redis_);
  redis_clock.NowMicros();
  clock_.AdvanceMicros(1000);
  redis_.AnswerTime(kStart / 1'000'000 + 1, 500);  // offset 1 s (+ 500 us - 500 us)
  const int64_t offset = redis_clock.NowMicros() - clock_.NowMicros();
  EXPECT_TRUE(redis_.held.empty());

  clock_.AdvanceMicros(1'000'000);
  redis_clock.NowMicros();
  ASSERT_EQ(redis_.held.size(), 1u);
  clock_.AdvanceMicros(5000);  // over twice the kept round trip of 1 ms
  redis_.AnswerTime(1, 0);
  EXPECT_EQ(redis_clock.samples().skipped, 1u);
  EXPECT_EQ(redis_clock.NowMicros() - clock_.NowMicros(), offset);

  clock_.AdvanceMicros(1'000'000);
  redis_clock.NowMicros();
  ASSERT_EQ(redis_.held.size(), 1u);
  redis_.Fail(absl::DeadlineExceededError("slow"));
  EXPECT_EQ(redis_clock.samples().failed, 1u);
  clock_.AdvanceMicros(99'999);
  redis_clock.NowMicros();
  EXPECT_TRUE(redis_.held.empty());
  clock_.AdvanceMicros(1);
  redis_clock.NowMicros();
  EXPECT_EQ(redis_.held.size(), 1u);
}

// Answers the sample the next reading sends with Redis' clock `redis_ahead_us` ahead of the
// fake's, after a round trip of `rtt_us` (Redis read it in the middle).
void SampleAt(RedisClock& redis_clock, FakeClock& clock, HeldExecutor& redis,
              int64_t redis_ahead_us, int64_t rtt_us = 200) {
  redis_clock.NowMicros();
  ASSERT_EQ(redis.held.size(), 1u);
  const int64_t read = clock.NowMicros() + rtt_us / 2 + redis_ahead_us;
  clock.AdvanceMicros(rtt_us);
  redis.AnswerTime(read / 1'000'000, read % 1'000'000);
}

// Verifies a sample that puts Redis ahead is applied at once, and one that puts it behind is
// slewed to at 1% of real time, the decision clock never reading earlier than before: it runs
// at 99% of real time until it meets Redis' clock, then at 100%.
TEST_F(RedisClockTest, StepsForwardAtOnceAndSlewsBackNeverSteppingBack) {
  RedisClock redis_clock(Options(), clock_, redis_);
  SampleAt(redis_clock, clock_, redis_, 0);
  EXPECT_EQ(redis_clock.NowMicros(), clock_.NowMicros());

  // Redis 5 ms ahead: at once.
  clock_.AdvanceMicros(1'000'000);
  SampleAt(redis_clock, clock_, redis_, 5'000);
  EXPECT_EQ(redis_clock.NowMicros(), clock_.NowMicros() + 5'000);
  EXPECT_EQ(redis_clock.samples().behind, 0u);

  // Redis 3 ms behind the fake (8 ms behind the decision clock): slewed over 800 ms.
  clock_.AdvanceMicros(1'000'000);
  SampleAt(redis_clock, clock_, redis_, -3'000);
  EXPECT_EQ(redis_clock.samples().behind, 1u);
  int64_t last = redis_clock.NowMicros();
  EXPECT_EQ(last, clock_.NowMicros() + 5'000);  // not a step back
  std::string metrics;
  redis_clock.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("sluice_redis_clock_slew_microseconds 8000\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_redis_clock_samples_behind_total 1\n"), std::string::npos);
  for (int ms = 1; ms <= 1000; ++ms) {
    clock_.AdvanceMicros(1'000);
    const int64_t now = redis_clock.NowMicros();
    // 1 ms of real time moves it by 0.99 ms while slewing, by 1 ms once it has met Redis'.
    EXPECT_EQ(now - last, ms <= 800 ? 990 : 1'000) << "at " << ms << " ms";
    last = now;
    // The next sample is due after 1 s; none is answered meanwhile.
    if (!redis_.held.empty()) break;
  }
  EXPECT_EQ(redis_clock.NowMicros(), clock_.NowMicros() - 3'000);
}

// Verifies a step of this host's wall clock (NTP) does not move the decision clock, either way:
// it runs on the monotonic clock plus Redis' offset.
TEST_F(RedisClockTest, WallClockStepsDoNotMoveTheDecisionClock) {
  SteppedWallClock clock;
  RedisClock redis_clock(Options(), clock, redis_);
  EXPECT_EQ(redis_clock.NowMicros(), kStart);  // before the first sample: the wall clock
  ASSERT_EQ(redis_.held.size(), 1u);
  clock.Advance(200);
  const int64_t read = kStart + 100 + 2'000;  // Redis 2 ms ahead
  redis_.AnswerTime(read / 1'000'000, read % 1'000'000);
  const int64_t before = redis_clock.NowMicros();
  EXPECT_EQ(before, kStart + 200 + 2'000);
  clock.StepWall(-1'500'000);
  clock.Advance(1'000);
  EXPECT_EQ(redis_clock.NowMicros(), before + 1'000);
  clock.StepWall(+3'000'000);
  clock.Advance(1'000);
  EXPECT_EQ(redis_clock.NowMicros(), before + 2'000);
  // What the metric calls the offset follows the wall clock's steps: Redis' minus this host's.
  std::string metrics;
  redis_clock.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("sluice_redis_clock_offset_microseconds -1498000\n"), std::string::npos)
      << metrics;
}

// Verifies the caller's clock is used as it is: no sampling, synced at once, no metrics.
TEST_F(RedisClockTest, CallerClockNeverSamples) {
  RedisClockOptions options = Options();
  options.use_caller_clock = true;
  RedisClock redis_clock(options, clock_, redis_);
  EXPECT_TRUE(redis_clock.synced());
  EXPECT_EQ(redis_clock.NowMicros(), kStart);
  EXPECT_TRUE(redis_.held.empty());
  std::string metrics;
  redis_clock.AppendMetrics(&metrics);
  EXPECT_EQ(metrics, "");
}

}  // namespace
}  // namespace sluice
