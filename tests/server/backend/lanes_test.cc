#include "server/backend/lanes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// Queues `n` checks of `algorithm` (indices from `first`) and returns the calls that may leave.
LaneCalls Queue(Lanes& lanes, Algorithm algorithm, size_t n, uint32_t first = 0) {
  return lanes.Enqueue(algorithm, [&](std::vector<LaneCheck>& waiting) {
    for (size_t i = 0; i < n; ++i) {
      LaneCheck& check = waiting.emplace_back();
      check.index = first + static_cast<uint32_t>(i);
    }
  });
}

std::vector<size_t> Sizes(const LaneCalls& calls) {
  std::vector<size_t> sizes;
  for (const LaneCall& call : calls) {
    sizes.push_back(call.size());
  }
  return sizes;
}

// Verifies that under light load every check leaves at once, until the lane has its calls out.
TEST(LanesTest, ChecksLeaveAtOnceWhileCallsAreFree) {
  Lanes lanes(/*max_batch=*/16, /*max_calls_out=*/2);
  EXPECT_EQ(Sizes(Queue(lanes, Algorithm::kTokenBucket, 1)), std::vector<size_t>{1});
  EXPECT_EQ(Sizes(Queue(lanes, Algorithm::kTokenBucket, 3)), std::vector<size_t>{3});
  // Two calls out: the next checks wait for company.
  EXPECT_TRUE(Queue(lanes, Algorithm::kTokenBucket, 2, 10).empty());
  EXPECT_TRUE(Queue(lanes, Algorithm::kTokenBucket, 1, 20).empty());
  // One returns: everything that waited leaves as one call, in queue order.
  LaneCalls next = lanes.CallReturned(Algorithm::kTokenBucket);
  ASSERT_EQ(Sizes(next), std::vector<size_t>{3});
  EXPECT_EQ(next[0][0].index, 10u);
  EXPECT_EQ(next[0][1].index, 11u);
  EXPECT_EQ(next[0][2].index, 20u);
  EXPECT_EQ(lanes.calls(Algorithm::kTokenBucket), 3u);
  EXPECT_EQ(lanes.checks(Algorithm::kTokenBucket), 7u);
}

// Verifies that full calls leave at once however many are out: a lane never caps throughput.
TEST(LanesTest, FullCallsLeaveAtOnce) {
  Lanes lanes(/*max_batch=*/4, /*max_calls_out=*/1);
  EXPECT_EQ(Sizes(Queue(lanes, Algorithm::kGcra, 1)), std::vector<size_t>{1});
  EXPECT_TRUE(Queue(lanes, Algorithm::kGcra, 2).empty());
  // Two waiting plus nine: two full calls leave, three wait for the call out to return.
  LaneCalls calls = Queue(lanes, Algorithm::kGcra, 9, 100);
  EXPECT_EQ(Sizes(calls), (std::vector<size_t>{4, 4}));
  EXPECT_EQ(calls[0][0].index, 0u);    // the two that waited go first
  EXPECT_EQ(calls[0][2].index, 100u);
  EXPECT_EQ(Sizes(lanes.CallReturned(Algorithm::kGcra)), std::vector<size_t>{});
  EXPECT_EQ(Sizes(lanes.CallReturned(Algorithm::kGcra)), std::vector<size_t>{});
  EXPECT_EQ(Sizes(lanes.CallReturned(Algorithm::kGcra)), std::vector<size_t>{3});
}

// Verifies a caller may send checks itself exactly when the lane would let them leave at once:
// nothing waiting, a call free (or a full call); such a call counts as the lane's, and while it
// is out, queued checks wait for it as for any other.
TEST(LanesTest, TakesACallForTheCallerOnlyWhenChecksWouldLeaveAtOnce) {
  Lanes lanes(/*max_batch=*/4, /*max_calls_out=*/2);
  EXPECT_TRUE(lanes.TryTakeCall(Algorithm::kTokenBucket, 1));
  EXPECT_TRUE(lanes.TryTakeCall(Algorithm::kTokenBucket, 2));
  // Both calls out: fewer than a full call would wait, so the caller must queue them.
  EXPECT_FALSE(lanes.TryTakeCall(Algorithm::kTokenBucket, 3));
  EXPECT_TRUE(lanes.TryTakeCall(Algorithm::kTokenBucket, 4));  // a full call leaves anyway
  EXPECT_TRUE(Queue(lanes, Algorithm::kTokenBucket, 1, 50).empty());
  // One waits now: the next caller queues behind it even when a call returns meanwhile.
  EXPECT_EQ(Sizes(lanes.CallReturned(Algorithm::kTokenBucket)), std::vector<size_t>{});
  EXPECT_EQ(Sizes(lanes.CallReturned(Algorithm::kTokenBucket)), std::vector<size_t>{1});
  EXPECT_FALSE(lanes.TryTakeCall(Algorithm::kTokenBucket, 1));  // calls out: the 4 and the 1
  EXPECT_EQ(lanes.calls(Algorithm::kTokenBucket), 4u);
  EXPECT_EQ(lanes.checks(Algorithm::kTokenBucket), 8u);
  // Another algorithm's lane is free.
  EXPECT_TRUE(lanes.TryTakeCall(Algorithm::kGcra, 1));
}

// Verifies each algorithm has its own lane: one lane's calls out do not hold another's checks.
TEST(LanesTest, AlgorithmsHaveTheirOwnLanes) {
  Lanes lanes(/*max_batch=*/16, /*max_calls_out=*/1);
  EXPECT_EQ(Sizes(Queue(lanes, Algorithm::kTokenBucket, 1)), std::vector<size_t>{1});
  EXPECT_TRUE(Queue(lanes, Algorithm::kTokenBucket, 1).empty());
  EXPECT_EQ(Sizes(Queue(lanes, Algorithm::kLeakyBucket, 2)), std::vector<size_t>{2});
  std::string metrics;
  lanes.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("sluice_redis_lane_calls_total{algorithm=\"token_bucket\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("sluice_redis_lane_checks_total{algorithm=\"leaky_bucket\"} 2\n"),
            std::string::npos);
  EXPECT_EQ(metrics.find("fixed_window"), std::string::npos);
}

// Verifies a split request answers once, after its last part, with every part's decisions, or
// with the first failure.
TEST(SplitRequestTest, AnswersAfterTheLastPart) {
  int answers = 0;
  absl::Status answered;
  std::vector<Decision> got;
  auto done = [&](absl::Status status, absl::Span<const Decision> decisions) {
    ++answers;
    answered = status;
    got.assign(decisions.begin(), decisions.end());
  };
  SplitRequest ok(done, /*checks=*/2, /*parts=*/2);
  ok.decisions[0].allowed = true;
  ok.Finish(absl::OkStatus());
  EXPECT_EQ(answers, 0);
  ok.decisions[1].remaining = 7;
  ok.Finish(absl::OkStatus());
  ASSERT_EQ(answers, 1);
  ASSERT_TRUE(answered.ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].allowed);
  EXPECT_EQ(got[1].remaining, 7u);

  SplitRequest failed(done, 2, 3);
  failed.Finish(absl::OkStatus());
  failed.Finish(absl::DeadlineExceededError("late"));
  failed.Finish(absl::UnavailableError("down"));
  EXPECT_EQ(answers, 2);
  EXPECT_EQ(answered.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace sluice
