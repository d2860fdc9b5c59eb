#include "server/quota/fair_share.h"

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::quota {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// Verifies the example: four clients asking 20, 60, 150 and 300 of a limit of 100 get
// 20 (all it asks) and 26.67 each for the others, which ask more than an equal part.
TEST(MaxMinSharesTest, SmallDemandsAreMetAndTheRestShareEqually) {
  EXPECT_THAT(MaxMinShares(100, {20, 60, 150, 300}),
              ElementsAre(20, DoubleNear(80.0 / 3, 1e-9), DoubleNear(80.0 / 3, 1e-9),
                          DoubleNear(80.0 / 3, 1e-9)));
  EXPECT_THAT(MaxMinShares(100, {300, 20, 30, 10}), ElementsAre(40, 20, 30, 10));
}

// Verifies that when every demand fits, each client gets its demand and an equal part of the
// surplus, so the shares still add up to the limit; and the degenerate inputs.
TEST(MaxMinSharesTest, SurplusIsSharedAndSharesAlwaysSumToTheLimit) {
  EXPECT_THAT(MaxMinShares(100, {10, 30}), ElementsAre(40, 60));
  EXPECT_THAT(MaxMinShares(100, {0, 0, 0, 0}), ElementsAre(25, 25, 25, 25));
  EXPECT_THAT(MaxMinShares(100, {-5, NAN, 50}),  // as 0, 0, 50: a surplus of 50 in thirds
              ElementsAre(DoubleNear(50.0 / 3, 1e-9), DoubleNear(50.0 / 3, 1e-9),
                          DoubleNear(50 + 50.0 / 3, 1e-9)));
  EXPECT_TRUE(MaxMinShares(100, {}).empty());
  EXPECT_THAT(MaxMinShares(0, {5, 7}), ElementsAre(0, 0));
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> demand(0, 200);
  for (int round = 0; round < 1000; ++round) {
    std::vector<double> demands(1 + rng() % 20);
    for (double& d : demands) {
      d = rng() % 4 == 0 ? 0 : demand(rng);
    }
    const double limit = demand(rng) * 3;
    const std::vector<double> shares = MaxMinShares(limit, demands);
    ASSERT_NEAR(Sum(shares), limit, 1e-6 * limit + 1e-9);
    // Max-min: a client gets less than it asks only if nobody gets more than it does.
    const double most = *std::max_element(shares.begin(), shares.end());
    for (size_t i = 0; i < demands.size(); ++i) {
      if (shares[i] < demands[i] - 1e-9) {
        ASSERT_NEAR(shares[i], most, 1e-9) << round;
      }
    }
  }
}

// Verifies the hysteresis: changes within the tolerance are not worth an update, and going to
// or from 0 always is.
TEST(ShareMovedTest, OnlyChangesPastTheToleranceCount) {
  EXPECT_FALSE(ShareMoved(100, 105, 0.1));
  EXPECT_FALSE(ShareMoved(100, 91, 0.1));
  EXPECT_TRUE(ShareMoved(100, 89, 0.1));
  EXPECT_TRUE(ShareMoved(100, 112, 0.1));
  EXPECT_TRUE(ShareMoved(0, 0.001, 0.1));
  EXPECT_TRUE(ShareMoved(3, 0, 0.1));
  EXPECT_FALSE(ShareMoved(0, 0, 0.1));
}

}  // namespace
}  // namespace sluice::quota
