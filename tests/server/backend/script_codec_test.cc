#include "server/backend/script_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/algorithm/fixed_window.h"

namespace sluice {
namespace {

std::string Pack(std::initializer_list<double> values) {
  std::string out;
  for (double v : values) {
    char bytes[sizeof(double)];
    std::memcpy(bytes, &v, sizeof v);
    out.append(bytes, sizeof bytes);
  }
  return out;
}

double At(const std::string& packed, size_t i) {
  double v;
  std::memcpy(&v, packed.data() + i * sizeof v, sizeof v);
  return v;
}

// Verifies the argument layouts the drivers unpack ("<dddddd" and "<d" + N * "<dddddd"), the
// last value of each record the charge (0 if_admitted, 1 always).
TEST(ScriptCodecTest, ArgumentLayouts) {
  const LimitParams p{Algorithm::kGcra, 7, 1'000'000, 9};
  std::string single;
  AppendSingleScriptArgs(1'700'000'000'123'456, p, 3, &single);
  EXPECT_EQ(single, Pack({1'700'000'000'123'456.0, 7, 1'000'000, 9, 3, 0}));
  LimitParams always = p;
  always.charge = Charge::kAlways;
  single.clear();
  AppendSingleScriptArgs(5, always, 3, &single);
  EXPECT_EQ(single, Pack({5, 7, 1'000'000, 9, 3, 1}));

  std::string group;
  AppendGroupScriptNow(-5, &group);
  AppendGroupScriptCheck(-5, p, 0, &group);
  LimitParams window{Algorithm::kFixedWindow, 4, 2, 0};
  window.charge = Charge::kAlways;
  AppendGroupScriptCheck(-5, window, 4, &group);
  ASSERT_EQ(group.size(), 8 + 2 * kScriptCheckBytes);
  EXPECT_EQ(At(group, 0), -5);
  EXPECT_EQ(At(group, 1), 5);  // kGcra
  EXPECT_EQ(At(group, 6), 0);  // if_admitted
  EXPECT_EQ(At(group, 7), 0);  // kFixedWindow
  EXPECT_EQ(At(group, 9), 2);   // period 2 us
  EXPECT_EQ(At(group, 10), 1);  // a window's burst slot: now -5 is in [-6, -4), 1 us left
  EXPECT_EQ(At(group, 11), 4);
  EXPECT_EQ(At(group, 12), 1);  // always
}

// Verifies a limit at or above 2^53 is not rounded into range: the scripts see >= 2^53 and
// refuse it, whatever the hits.
TEST(ScriptCodecTest, HugeValuesStayOutOfRange) {
  std::string args;
  AppendSingleScriptArgs(0, LimitParams{Algorithm::kSlidingWindowLog, (1ull << 53) + 1, 1, 1},
                         std::numeric_limits<uint64_t>::max(), &args);
  EXPECT_GE(At(args, 1), 9007199254740992.0);
  EXPECT_GE(At(args, 4), 9007199254740992.0);
}

// Verifies a request of more hits than the rule can ever hold is sent as its capacity + 1, in
// every argument form, so that no hits_addend (up to 2^64 - 1) leaves the scripts' range.
TEST(ScriptCodecTest, HitsBeyondCapacityAreSentAsCapacityPlusOne) {
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  const LimitParams bucket{Algorithm::kTokenBucket, 6, 60'000'000, 3};
  const LimitParams window{Algorithm::kFixedWindow, 10, 1'000'000, 0};
  EXPECT_EQ(WireHits(bucket, huge), 4u);  // burst 3
  EXPECT_EQ(WireHits(bucket, 4), 4u);
  EXPECT_EQ(WireHits(bucket, 3), 3u);
  EXPECT_EQ(WireHits(window, uint64_t{1} << 63), 11u);  // limit 10
  EXPECT_EQ(WireHits(window, 0), 0u);
  std::string single;
  AppendSingleScriptArgs(0, bucket, huge, &single);
  EXPECT_EQ(At(single, 4), 4);
  std::string group;
  AppendGroupScriptNow(0, &group);
  AppendGroupScriptCheck(0, window, huge, &group);
  EXPECT_EQ(At(group, 5), 11);
}

// Verifies a rule that charges always is sent the hits it is asked, up to kMaxChargedHits: they
// are charged even though the request can never pass.
TEST(ScriptCodecTest, ChargedHitsAreSentAsAsked) {
  LimitParams bucket{Algorithm::kTokenBucket, 6, 60'000'000, 3};
  bucket.charge = Charge::kAlways;
  EXPECT_EQ(WireHits(bucket, 3), 3u);
  EXPECT_EQ(WireHits(bucket, 700), 700u);
  EXPECT_EQ(WireHits(bucket, std::numeric_limits<uint64_t>::max()), kMaxChargedHits);
}

TEST(ScriptCodecTest, DecodesDecisions) {
  std::vector<Decision> d;
  ASSERT_TRUE(DecodeScriptDecisions(Pack({1, 5, 0, 1000, 0, 0, 0, 250, 9007199254740992.0, 7}), 2,
                                    &d)
                  .ok());
  ASSERT_EQ(d.size(), 2u);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_EQ(d[0].remaining, 5u);
  EXPECT_EQ(d[0].reset_after_us, 1000);
  EXPECT_FALSE(d[1].allowed);
  EXPECT_EQ(d[1].retry_after_us, 250);
  EXPECT_EQ(d[1].reset_after_us, 9007199254740992);
  EXPECT_EQ(d[1].delay_us, 7);
}

// Verifies a reply that is not exactly N decisions of integers is an error, never a decision.
TEST(ScriptCodecTest, RejectsMalformedReplies) {
  std::vector<Decision> d;
  EXPECT_FALSE(DecodeScriptDecisions(Pack({1, 5, 0, 1000}), 1, &d).ok());            // short
  EXPECT_FALSE(DecodeScriptDecisions(Pack({1, 5, 0, 1000, 0, 0}), 1, &d).ok());      // long
  EXPECT_FALSE(DecodeScriptDecisions(Pack({1, 5, 0, 1000, 0}), 2, &d).ok());         // count
  EXPECT_FALSE(DecodeScriptDecisions(Pack({2, 5, 0, 1000, 0}), 1, &d).ok());         // allowed 2
  EXPECT_FALSE(DecodeScriptDecisions(Pack({1, 5.5, 0, 1000, 0}), 1, &d).ok());       // fraction
  EXPECT_FALSE(DecodeScriptDecisions(Pack({1, 5, NAN, 1000, 0}), 1, &d).ok());       // NaN
  EXPECT_FALSE(DecodeScriptDecisions(Pack({1, 5, 0, INFINITY, 0}), 1, &d).ok());     // inf
  EXPECT_FALSE(DecodeScriptDecisions(Pack({1, 5, 0, 1e300, 0}), 1, &d).ok());        // > 2^53
  EXPECT_TRUE(d.empty());
}

TEST(ScriptCodecTest, FixedWindowTtlIsTheRestOfTheWindow) {
  const LimitParams second{Algorithm::kFixedWindow, 1, 1'000'000, 1};
  EXPECT_EQ(FixedWindowTtlMs(second, 0), 1000);
  EXPECT_EQ(FixedWindowTtlMs(second, 999'999), 1);    // 1 us left: at least 1 ms
  EXPECT_EQ(FixedWindowTtlMs(second, 998'500), 2);    // 1.5 ms rounds up
  EXPECT_EQ(FixedWindowTtlMs(second, -1), 1);
}

// Verifies the lone fixed window decides exactly as EvaluateFixedWindow on the count before the
// increment, for every count around the limit, and treats a negative count as 0.
TEST(ScriptCodecTest, FixedWindowDecisionMatchesTheAlgorithm) {
  const LimitParams p{Algorithm::kFixedWindow, 5, 1'000'000, 0};
  const int64_t now = 1'700'000'000'250'000;
  for (uint64_t hits : {0u, 1u, 2u, 5u, 6u}) {
    for (int64_t before = 0; before <= 8; ++before) {
      FixedWindowState state{now - 250'000, static_cast<uint64_t>(before)};
      const Decision expected = EvaluateFixedWindow(p, state, now, hits);
      const Decision got =
          FixedWindowDecision(p, now, hits, before + static_cast<int64_t>(hits));
      SCOPED_TRACE(testing::Message() << "hits " << hits << " before " << before);
      EXPECT_EQ(got.allowed, expected.allowed);
      EXPECT_EQ(got.remaining, expected.remaining);
      EXPECT_EQ(got.retry_after_us, expected.retry_after_us);
      EXPECT_EQ(got.reset_after_us, expected.reset_after_us);
    }
  }
  const Decision from_negative = FixedWindowDecision(p, now, 1, -3);
  EXPECT_TRUE(from_negative.allowed);
  EXPECT_EQ(from_negative.remaining, 4u);
}

}  // namespace
// Verifies the rlqs_exchange values: doubles round-trip exactly, none packs to nothing, and a
// trailing partial double is ignored.
TEST(ScriptCodecTest, PackedDoublesRoundTrip) {
  std::string packed;
  AppendPackedDoubles({}, &packed);
  EXPECT_TRUE(packed.empty());
  EXPECT_TRUE(ReadPackedDoubles(packed).empty());
  const std::vector<double> values = {20, 26.666666666666668, 0, 1e15};
  AppendPackedDoubles(values, &packed);
  EXPECT_EQ(packed.size(), 32u);
  EXPECT_EQ(ReadPackedDoubles(packed), values);
  EXPECT_EQ(ReadPackedDoubles(packed + "abc"), values);
}

}  // namespace sluice
