#include "server/redis/cluster/slot_map_loader.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::RedisServer;

// Verifies the map of a real cluster-enabled node, reached with a password, is loaded.
TEST(SlotMapLoaderTest, LoadsTheMapOfARealNode) {
  absl::StatusOr<std::unique_ptr<RedisServer>> node = RedisServer::Start(
      {.password = "secret",
       .extra_config = {"cluster-enabled yes", "cluster-config-file nodes.conf"}});
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE((*node)->Command({"CLUSTER", "ADDSLOTSRANGE", "100", "199"}).ok());
  SlotMapLoader loader({.password = "secret"});
  absl::StatusOr<SlotMap> map = loader.Load((*node)->address());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->covered_slots(), 100);
  ASSERT_EQ(map->nodes().size(), 1u);
  EXPECT_EQ(map->nodes()[0].address, (*node)->address());
  EXPECT_EQ(map->NodeForSlot(150), 0);
  EXPECT_EQ(map->NodeForSlot(99), -1);

  absl::StatusOr<SlotMap> refused = SlotMapLoader({.password = "wrong"}).Load((*node)->address());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
}

// Verifies a node without cluster support and an unreachable address give distinct errors.
TEST(SlotMapLoaderTest, ReportsWhyNoMapCameBack) {
  absl::StatusOr<std::unique_ptr<RedisServer>> plain = RedisServer::Start();
  ASSERT_TRUE(plain.ok()) << plain.status();
  SlotMapLoader loader({.timeout = absl::Milliseconds(500)});
  absl::StatusOr<SlotMap> not_cluster = loader.Load((*plain)->address());
  EXPECT_EQ(not_cluster.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(not_cluster.status().message()), HasSubstr("cluster support"));

  absl::StatusOr<SlotMap> down = loader.Load(absl::StrCat("127.0.0.1:", testing::FreePort()));
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_EQ(loader.Load("no-port").status().code(), absl::StatusCode::kInvalidArgument);
}

// Verifies a node that stops answering is given up on after the timeout, not waited for.
TEST(SlotMapLoaderTest, TimesOutOnAHungNode) {
  absl::StatusOr<std::unique_ptr<RedisServer>> node = RedisServer::Start(
      {.extra_config = {"cluster-enabled yes", "cluster-config-file nodes.conf"}});
  ASSERT_TRUE(node.ok()) << node.status();
  (*node)->Pause();
  SlotMapLoader loader({.timeout = absl::Milliseconds(200)});
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SlotMap> hung = loader.Load((*node)->address());
  auto took = std::chrono::steady_clock::now() - start;
  (*node)->Resume();
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kUnavailable) << hung.status();
  EXPECT_LT(took, std::chrono::seconds(2));
}

}  // namespace
}  // namespace sluice
