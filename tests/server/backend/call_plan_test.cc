#include "server/backend/call_plan.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using Kind = PlannedCall::Kind;

constexpr int64_t kNow = 1'700'000'000'123'456;

LimitCheck Check(absl::string_view key, Algorithm algorithm, uint32_t group,
                 uint64_t limit = 10, uint64_t hits = 1) {
  LimitCheck check;
  check.key = key;
  check.params = LimitParams{algorithm, limit, 1'000'000, limit};
  check.hits = hits;
  check.group = group;
  return check;
}

// "kind:checks" per call, for one-line expectations.
std::vector<std::string> Describe(const CallPlan& plan) {
  std::vector<std::string> out;
  for (const PlannedCall& call : plan.calls) {
    const char* kind = call.kind == Kind::kLocal         ? "local"
                       : call.kind == Kind::kFixedWindow ? "fixed_window"
                       : call.kind == Kind::kGroup       ? "group"
                                                         : "lone";
    std::string text = absl::StrCat(kind, ":");
    for (uint32_t c : call.checks) {
      absl::StrAppend(&text, c);
    }
    out.push_back(text);
  }
  return out;
}

// Verifies a limit of 0 is decided in the plan, with no Redis call, as ZeroLimitDecision.
TEST(CallPlanTest, ZeroLimitIsDecidedWithoutRedis) {
  const std::vector<LimitCheck> checks = {Check("{a}", Algorithm::kTokenBucket, 0, 0, 3)};
  for (bool lanes : {false, true}) {
    const CallPlan plan = PlanCalls(checks, kNow, {.lanes = lanes});
    EXPECT_THAT(Describe(plan), ElementsAre("local:0"));
    EXPECT_TRUE(plan.lane_checks.empty());
    EXPECT_FALSE(plan.calls[0].decision.allowed);
    EXPECT_EQ(plan.calls[0].decision.retry_after_us, 1'000'000);
  }
}

// Verifies a lone fixed window becomes INCRBY on the window key that holds now, carrying what
// its reply needs, and never goes to a lane.
TEST(CallPlanTest, LoneFixedWindowRunsWithoutScript) {
  const std::vector<LimitCheck> checks = {Check("{a}fw:1", Algorithm::kFixedWindow, 0, 5, 2)};
  const CallPlan plan = PlanCalls(checks, kNow, {.lanes = true});
  ASSERT_THAT(Describe(plan), ElementsAre("fixed_window:0"));
  EXPECT_EQ(plan.calls[0].window_key, "{a}fw:1:w1700000000");
  EXPECT_EQ(plan.calls[0].params.limit, 5u);
  EXPECT_EQ(plan.calls[0].hits, 2u);
}

// Verifies a group of several checks is one group call, whatever their algorithms and limits.
TEST(CallPlanTest, GroupIsOneCall) {
  const std::vector<LimitCheck> checks = {Check("{a}1", Algorithm::kFixedWindow, 0),
                                          Check("{a}2", Algorithm::kTokenBucket, 0, 0),
                                          Check("{b}", Algorithm::kGcra, 1)};
  const CallPlan plan = PlanCalls(checks, kNow, {});
  EXPECT_THAT(Describe(plan), ElementsAre("group:01", "lone:2"));
}

// Verifies that with lanes, lone script checks go to the lanes in check order, while groups,
// fixed windows and zero limits stay in the request's own batch.
TEST(CallPlanTest, LanesTakeLoneScriptChecks) {
  const std::vector<LimitCheck> checks = {
      Check("{a}", Algorithm::kTokenBucket, 0), Check("{b}", Algorithm::kFixedWindow, 1),
      Check("{c}", Algorithm::kGcra, 2),        Check("{d}1", Algorithm::kGcra, 3),
      Check("{d}2", Algorithm::kGcra, 3),       Check("{e}", Algorithm::kTokenBucket, 4, 0)};
  const CallPlan plan = PlanCalls(checks, kNow, {.lanes = true});
  EXPECT_THAT(Describe(plan), ElementsAre("fixed_window:1", "group:34", "local:5"));
  EXPECT_THAT(plan.lane_checks, ElementsAre(0, 2));
}

// Verifies that without lanes a request's lone checks of one algorithm share one call (the
// batch script), placed at the first of them; other algorithms get their own.
TEST(CallPlanTest, LoneChecksOfOneAlgorithmShareACall) {
  const std::vector<LimitCheck> checks = {
      Check("{a}", Algorithm::kTokenBucket, 0), Check("{b}", Algorithm::kGcra, 1),
      Check("{c}", Algorithm::kTokenBucket, 2), Check("{d}", Algorithm::kTokenBucket, 3, 0),
      Check("{e}", Algorithm::kGcra, 4)};
  const CallPlan plan = PlanCalls(checks, kNow, {});
  EXPECT_THAT(Describe(plan), ElementsAre("lone:02", "lone:14", "local:3"));
}

// Verifies that on a cluster lone checks share a call only when their keys share a hash tag
// (so a slot); a group's checks are not lone and never join.
TEST(CallPlanTest, ClusterSharesCallsOnlyWithinAHashTag) {
  const std::vector<LimitCheck> checks = {
      Check("x{u1}a", Algorithm::kTokenBucket, 0), Check("x{u2}b", Algorithm::kTokenBucket, 1),
      Check("x{u1}c", Algorithm::kTokenBucket, 2), Check("x{u1}d", Algorithm::kTokenBucket, 3),
      Check("x{u1}e", Algorithm::kTokenBucket, 3), Check("x{u2}f", Algorithm::kTokenBucket, 4)};
  const CallPlan plan = PlanCalls(checks, kNow, {.cluster = true});
  EXPECT_THAT(Describe(plan), ElementsAre("lone:02", "lone:15", "group:34"));
  EXPECT_TRUE(plan.lane_checks.empty());
}

// Verifies an empty request plans nothing.
TEST(CallPlanTest, EmptyRequest) {
  const CallPlan plan = PlanCalls({}, kNow, {.lanes = true});
  EXPECT_TRUE(plan.calls.empty());
  EXPECT_TRUE(plan.lane_checks.empty());
}

// Verifies that with upstream keys a lone fixed window is counted in envoyproxy/ratelimit's key
// (and marked for upstream's EXPIRE), while a group keeps Sluice's window keys (a group script
// needs its keys in one hash tag, which upstream's keys do not have).
TEST(CallPlanTest, UpstreamKeysForLoneFixedWindows) {
  const std::vector<LimitCheck> checks = {
      Check("rl_{edge|user=u}fw:60", Algorithm::kFixedWindow, 0),
      Check("rl_{edge|user=v}fw:60", Algorithm::kFixedWindow, 1),
      Check("rl_{edge|user=v}fw:3600", Algorithm::kFixedWindow, 1)};
  const CallPlan plan = PlanCalls(checks, kNow, {.upstream_keys = true, .key_prefix = "rl_"});
  ASSERT_THAT(Describe(plan), ElementsAre("fixed_window:0", "group:12"));
  EXPECT_EQ(plan.calls[0].window_key, "rl_edge_user_u_1700000000");
  EXPECT_TRUE(plan.calls[0].upstream_key);
  // A rule that groups can decide keeps Sluice's key when alone too: one rule, one counter.
  for (bool hash_tagged : {true, false}) {
    std::vector<LimitCheck> alone = {Check("rl_{edge|user=u}fw:60", Algorithm::kFixedWindow, 0)};
    alone[0].params.hash_tagged = hash_tagged;
    alone[0].params.shares_descriptor = !hash_tagged;
    const CallPlan own = PlanCalls(alone, kNow, {.upstream_keys = true, .key_prefix = "rl_"});
    EXPECT_FALSE(own.calls[0].upstream_key);
    EXPECT_EQ(own.calls[0].window_key, "rl_{edge|user=u}fw:60:w1700000000");
  }
  // A key of another prefix cannot be read back: Sluice's window key.
  const std::vector<LimitCheck> foreign = {
      Check("x:{edge|user=u}fw:60", Algorithm::kFixedWindow, 0)};
  const CallPlan fallback =
      PlanCalls(foreign, kNow, {.upstream_keys = true, .key_prefix = "rl_"});
  EXPECT_FALSE(fallback.calls[0].upstream_key);
  EXPECT_EQ(fallback.calls[0].window_key, "x:{edge|user=u}fw:60:w1700000000");
}

// Verifies a give-back of hits charged in a window that is over gives nothing (that window's
// hits are no later window's), and one in the same window gives them back (LimitCheck::at_us).
TEST(CallPlanTest, GiveBackToAnEndedWindowGivesNothing) {
  LimitCheck refund = Check("{a}fw:1", Algorithm::kFixedWindow, 0, 5, 3);
  refund.refund = true;
  refund.at_us = kNow - 100'000;  // the same second as kNow (.123456)
  EXPECT_EQ(PlanCalls({&refund, 1}, kNow, {}).calls[0].hits, 3u);
  refund.at_us = kNow - 123'457;  // the second before
  EXPECT_EQ(PlanCalls({&refund, 1}, kNow, {}).calls[0].hits, 0u);
  refund.at_us = 0;  // a refund made now (Envoy's)
  EXPECT_EQ(PlanCalls({&refund, 1}, kNow, {}).calls[0].hits, 3u);
}

}  // namespace
}  // namespace sluice
