#include "server/redis/cluster/slot_map.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RedisReply Node(std::string host, int64_t port, std::string id = "") {
  std::vector<RedisReply> fields = {RedisReply::String(std::move(host)), RedisReply::Integer(port)};
  if (!id.empty()) {
    fields.push_back(RedisReply::String(std::move(id)));
    fields.push_back(RedisReply::Array({}));  // Redis 7 metadata
  }
  return RedisReply::Array(std::move(fields));
}

RedisReply Entry(int64_t first, int64_t last, std::vector<RedisReply> nodes) {
  std::vector<RedisReply> fields = {RedisReply::Integer(first), RedisReply::Integer(last)};
  for (RedisReply& node : nodes) {
    fields.push_back(std::move(node));
  }
  return RedisReply::Array(std::move(fields));
}

// What a three-master Redis 7.0 cluster with one replica each answers.
RedisReply ThreeMasters() {
  return RedisReply::Array({
      Entry(0, 5460, {Node("127.0.0.1", 7000, "a"), Node("127.0.0.1", 7004, "e")}),
      Entry(5461, 10922, {Node("127.0.0.1", 7001, "b"), Node("127.0.0.1", 7005, "f")}),
      Entry(10923, 16383, {Node("127.0.0.1", 7002, "c"), Node("127.0.0.1", 7003, "d")}),
  });
}

// Verifies a full CLUSTER SLOTS reply maps every slot to its master, with replicas.
TEST(SlotMapTest, ParsesClusterSlots) {
  absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(ThreeMasters(), "127.0.0.1");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->covered_slots(), kClusterSlots);
  ASSERT_EQ(map->nodes().size(), 3u);
  EXPECT_EQ(map->nodes()[0].address, "127.0.0.1:7000");
  EXPECT_THAT(map->nodes()[0].replicas, ElementsAre("127.0.0.1:7004"));
  EXPECT_EQ(map->NodeForSlot(0), 0);
  EXPECT_EQ(map->NodeForSlot(5460), 0);
  EXPECT_EQ(map->NodeForSlot(5461), 1);
  EXPECT_EQ(map->NodeForSlot(10923), 2);
  EXPECT_EQ(map->NodeForSlot(16383), 2);
  EXPECT_EQ(map->FindNode("127.0.0.1:7001"), 1);
  EXPECT_EQ(map->FindNode("127.0.0.1:7004"), -1);  // a replica is not a routing target
}

// Verifies a master serving several ranges is one node, and old (Redis 3) entries without ids
// parse too.
TEST(SlotMapTest, MergesRangesOfOneMaster) {
  RedisReply reply = RedisReply::Array({
      Entry(0, 99, {Node("10.0.0.1", 6379)}),
      Entry(100, 199, {Node("10.0.0.2", 6379), Node("10.0.0.3", 6379)}),
      Entry(200, 16383, {Node("10.0.0.1", 6379), Node("10.0.0.4", 6379)}),
  });
  absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(reply, "10.0.0.1");
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->nodes().size(), 2u);
  EXPECT_EQ(map->NodeForSlot(50), map->NodeForSlot(300));
  EXPECT_THAT(map->nodes()[0].replicas, ElementsAre("10.0.0.4:6379"));
  EXPECT_EQ(map->Ranges().size(), 3u);
}

// Verifies an empty host is the replying node's, "?" replicas are dropped, IPv6 is bracketed.
TEST(SlotMapTest, ResolvesHostsLikeRedisMeansThem) {
  RedisReply reply = RedisReply::Array({
      Entry(0, 8191, {Node("", 7000), Node("?", 7003)}),
      Entry(8192, 16383, {Node("::1", 7001)}),
  });
  absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(reply, "192.168.1.5");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->nodes()[0].address, "192.168.1.5:7000");
  EXPECT_TRUE(map->nodes()[0].replicas.empty());
  EXPECT_EQ(map->nodes()[1].address, "[::1]:7001");
}

// Verifies overlapping ranges are rejected with both ranges named.
TEST(SlotMapTest, RejectsOverlappingRanges) {
  RedisReply reply = RedisReply::Array({
      Entry(0, 200, {Node("127.0.0.1", 7000)}),
      Entry(150, 16383, {Node("127.0.0.1", 7001)}),
  });
  absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(reply, "127.0.0.1");
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(map.status().message()),
              HasSubstr("0-200 (127.0.0.1:7000) overlaps slot range 150-16383 (127.0.0.1:7001)"));
  // The same slot twice for one master is an overlap too.
  EXPECT_FALSE(SlotMap::FromRanges({{0, 10, "a:1", {}}, {10, 20, "a:1", {}}}).ok());
}

// Verifies out-of-range, reversed and malformed entries are rejected with clear errors.
TEST(SlotMapTest, RejectsInvalidRangesAndMalformedReplies) {
  struct Case {
    RedisReply reply;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({RedisReply::Array({Entry(0, 16384, {Node("h", 1)})}), "0-16384"});
  cases.push_back({RedisReply::Array({Entry(-1, 5, {Node("h", 1)})}), "-1-5"});
  cases.push_back({RedisReply::Array({Entry(9, 5, {Node("h", 1)})}), "9-5"});
  cases.push_back({RedisReply::Array({Entry(0, 5, {Node("h", 0)})}), "port 0"});
  cases.push_back(
      {RedisReply::Array({Entry(0, 5, {RedisReply::String("h:1")})}), "not [host, port"});
  cases.push_back({RedisReply::Array({RedisReply::Array({RedisReply::Integer(0)})}), "entry 0"});
  cases.push_back(
      {RedisReply::Error("ERR This instance has cluster support disabled"), "not an array"});
  for (const Case& c : cases) {
    absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(c.reply, "127.0.0.1");
    ASSERT_FALSE(map.ok()) << c.reply.DebugString();
    EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(map.status().message()), HasSubstr(c.message));
  }
  EXPECT_FALSE(SlotMap::FromRanges({{0, 5, "", {}}}).ok());
}

// Verifies a node host that cannot be a host name (control bytes, a space, 256 bytes or more)
// is refused, and that the error shows it escaped and cut, however long the reply: a node's
// text never reaches a log line or an address as it came.
TEST(SlotMapTest, RejectsHostsThatAreNotHostNamesAndCutsTheirText) {
  for (const std::string& host :
       {std::string("evil\nI forged line"), std::string("a b"), std::string(256, 'h'),
        std::string("\x1b[31mred")}) {
    absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(
        RedisReply::Array({Entry(0, 16383, {Node(host, 7000)})}), "127.0.0.1");
    ASSERT_FALSE(map.ok()) << host;
    const std::string message(map.status().message());
    EXPECT_THAT(message, HasSubstr("not a host name"));
    EXPECT_EQ(message.find('\n'), std::string::npos);
    EXPECT_EQ(message.find('\x1b'), std::string::npos);
    EXPECT_LT(message.size(), 200u);
  }
  std::vector<RedisReply> junk(100000, RedisReply::String(std::string(100, 'j')));
  absl::StatusOr<SlotMap> map =
      SlotMap::FromClusterSlots(RedisReply::Array({RedisReply::Array(std::move(junk))}), "h");
  ASSERT_FALSE(map.ok());
  EXPECT_LT(map.status().message().size(), 1000u);
}

// Verifies uncovered slots are tolerated and answer -1, and a master nobody can reach ("?")
// leaves its slots uncovered.
TEST(SlotMapTest, ToleratesUncoveredSlots) {
  RedisReply reply = RedisReply::Array({
      Entry(0, 999, {Node("127.0.0.1", 7000)}),
      Entry(2000, 2999, {Node("?", 7001)}),
      Entry(3000, 16383, {Node("127.0.0.1", 7002)}),
  });
  absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(reply, "127.0.0.1");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->covered_slots(), kClusterSlots - 2000);
  EXPECT_EQ(map->NodeForSlot(1000), -1);
  EXPECT_EQ(map->NodeForSlot(2500), -1);
  EXPECT_EQ(map->NodeForSlot(3000), 1);
  EXPECT_THAT(map->DebugString(), HasSubstr("uncovered: 2000"));
  EXPECT_EQ(SlotMap().covered_slots(), 0);
  EXPECT_EQ(SlotMap().NodeForSlot(0), -1);
}

// Verifies a MOVED patch yields a new map with only that slot changed, adding a new node if
// needed, and leaves the original untouched.
TEST(SlotMapTest, WithSlotOwnerPatchesOneSlot) {
  SlotMap map = *SlotMap::FromClusterSlots(ThreeMasters(), "127.0.0.1");
  SlotMap moved = map.WithSlotOwner(42, "127.0.0.1:7001");
  EXPECT_EQ(moved.NodeForSlot(42), 1);
  EXPECT_EQ(moved.NodeForSlot(41), 0);
  EXPECT_EQ(map.NodeForSlot(42), 0);
  EXPECT_NE(map, moved);
  SlotMap added = map.WithSlotOwner(7, "127.0.0.1:7100");
  ASSERT_EQ(added.nodes().size(), 4u);
  EXPECT_EQ(added.NodeForSlot(7), 3);
  EXPECT_EQ(added.nodes()[3].address, "127.0.0.1:7100");
  SlotMap uncovered;
  EXPECT_EQ(uncovered.WithSlotOwner(9, "a:1").covered_slots(), 1);
}

// Verifies equality compares routing (slot owners and replicas), not node order.
TEST(SlotMapTest, EqualityComparesRouting) {
  SlotMap a = *SlotMap::FromRanges({{0, 99, "a:1", {"r:1"}}, {100, 16383, "b:1", {}}});
  SlotMap b = *SlotMap::FromRanges({{100, 16383, "b:1", {}}, {0, 99, "a:1", {"r:1"}}});
  SlotMap c = *SlotMap::FromRanges({{0, 99, "a:1", {}}, {100, 16383, "b:1", {}}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace sluice
