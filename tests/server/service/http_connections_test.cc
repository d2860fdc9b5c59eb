#include "server/service/http_connections.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

// Verifies the HTTP connection cap takes at most half of the descriptor limit, and never 0.
TEST(HttpConnectionCapTest, TakesAtMostHalfOfTheDescriptorLimit) {
  EXPECT_EQ(HttpConnectionCap(1024, 256), 128u);
  EXPECT_EQ(HttpConnectionCap(1024, 1048576), 1024u);
  EXPECT_EQ(HttpConnectionCap(100, 20000), 100u);
  EXPECT_EQ(HttpConnectionCap(1024, 0), 1024u);  // unlimited
  EXPECT_EQ(HttpConnectionCap(1024, 1), 1u);
}

}  // namespace
}  // namespace sluice
