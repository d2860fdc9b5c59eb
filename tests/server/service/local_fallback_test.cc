#include "server/service/local_fallback.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

class LocalFallbackTest : public ::testing::Test {
 protected:
  static LimitParams Params(Algorithm algorithm, uint64_t limit, uint64_t burst) {
    LimitParams params;
    params.algorithm = algorithm;
    params.limit = limit;
    params.burst = burst;
    params.period_us = 60'000'000;
    return params;
  }

  FakeClock clock_{1700006400000000};
};

// Verifies a share rounds up, never to 0 for a limit above 0, and keeps 0 at 0; and that
// decimal shares give the whole numbers they mean despite binary rounding (30 * 0.1 is 3).
TEST_F(LocalFallbackTest, ShareRoundsUpToAtLeastOne) {
  EXPECT_EQ(LocalShareOf(30, 0.5), 15u);
  EXPECT_EQ(LocalShareOf(31, 0.5), 16u);
  EXPECT_EQ(LocalShareOf(30, 0.1), 3u);
  EXPECT_EQ(LocalShareOf(100, 0.07), 7u);
  EXPECT_EQ(LocalShareOf(10, 0.3), 3u);
  EXPECT_EQ(LocalShareOf(10, 0.33), 4u);
  EXPECT_EQ(LocalShareOf(1, 0.01), 1u);
  EXPECT_EQ(LocalShareOf(3, 1e-9), 1u);
  EXPECT_EQ(LocalShareOf(0, 0.5), 0u);
  EXPECT_EQ(LocalShareOf(0, 1), 0u);
  EXPECT_EQ(LocalShareOf(30, 1), 30u);
  EXPECT_EQ(LocalShareOf(4294967295u, 0.5), 2147483648u);
  EXPECT_LE(LocalShareOf(std::numeric_limits<uint64_t>::max(), 0.999999),
            std::numeric_limits<uint64_t>::max());
}

// Verifies Scale divides limit and burst by replicas_hint (rounded up, at least 1), lets a
// rule's local_share win, and leaves everything else as it was.
TEST_F(LocalFallbackTest, ScalesLimitAndBurst) {
  LocalFallback three(clock_, 3);
  LimitParams bucket = Params(Algorithm::kTokenBucket, 10, 30);
  bucket.charge = Charge::kAlways;
  LimitParams scaled = three.Scale(bucket, std::nullopt);
  EXPECT_EQ(scaled.limit, 4u);
  EXPECT_EQ(scaled.burst, 10u);
  EXPECT_EQ(scaled.algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(scaled.period_us, 60'000'000);
  EXPECT_EQ(scaled.charge, Charge::kAlways);
  scaled = three.Scale(bucket, 0.5);
  EXPECT_EQ(scaled.limit, 5u);
  EXPECT_EQ(scaled.burst, 15u);
  EXPECT_EQ(three.Scale(Params(Algorithm::kFixedWindow, 1, 1), std::nullopt).limit, 1u);
  EXPECT_EQ(three.Scale(Params(Algorithm::kFixedWindow, 0, 0), std::nullopt).limit, 0u);
  EXPECT_EQ(three.Scale(Params(Algorithm::kFixedWindow, 0, 0), 0.5).limit, 0u);

  LocalFallback one(clock_, 1);
  EXPECT_EQ(one.Scale(bucket, std::nullopt).limit, 10u);
  EXPECT_EQ(one.Scale(bucket, std::nullopt).burst, 30u);
  EXPECT_EQ(one.Scale(bucket, 0.2).burst, 6u);
}

// Verifies the store appears on first use only, and keeps each key's state across calls.
TEST_F(LocalFallbackTest, StateIsCreatedOnFirstUseAndPersists) {
  LocalFallback fallback(clock_, 3);
  EXPECT_EQ(fallback.KeyCount(), 0u);
  const std::string key = "sluice:{api.user_a}fw:60";
  LimitCheck check{key, fallback.Scale(Params(Algorithm::kFixedWindow, 30, 30), std::nullopt),
                   1, 0};
  std::vector<Decision> decisions(1);
  for (int i = 0; i < 10; ++i) {
    fallback.Decide({&check, 1}, absl::MakeSpan(decisions));
    ASSERT_EQ(decisions.size(), 1u);
    EXPECT_TRUE(decisions[0].allowed) << i;
  }
  EXPECT_EQ(fallback.KeyCount(), 1u);
  fallback.Decide({&check, 1}, absl::MakeSpan(decisions));
  EXPECT_FALSE(decisions[0].allowed);
  EXPECT_EQ(decisions[0].retry_after_us, 60'000'000);
}

// Verifies the store keeps within the bytes its options allow, however many large keys the
// outage brings, and reports nothing before it exists.
TEST_F(LocalFallbackTest, StoreIsBoundedInBytes) {
  LocalFallback fallback(clock_, 1, MemoryBackendOptions{.max_bytes = size_t{2} << 20});
  EXPECT_EQ(fallback.BytesUsed(), 0u);
  std::string metrics;
  fallback.AppendMetrics(&metrics);
  EXPECT_EQ(metrics, "");
  const LimitParams params = Params(Algorithm::kTokenBucket, 10, 10);
  std::vector<Decision> decisions(1);
  for (int i = 0; i < 5000; ++i) {
    std::string key = std::to_string(i) + "-";
    key.resize(1024, 'v');
    const LimitCheck check{key, params, 1, 0};
    fallback.Decide({&check, 1}, absl::MakeSpan(decisions));
    ASSERT_TRUE(decisions[0].allowed);
  }
  EXPECT_GT(fallback.BytesUsed(), size_t{1} << 20);
  EXPECT_LE(fallback.BytesUsed(), size_t{2} << 20);
  EXPECT_LT(fallback.KeyCount(), 2000u);
  fallback.AppendMetrics(&metrics);
  EXPECT_NE(metrics.find("sluice_memory_backend_bytes "), std::string::npos);
}

}  // namespace
}  // namespace sluice
