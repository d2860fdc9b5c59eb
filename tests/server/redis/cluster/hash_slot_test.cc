#include "server/redis/cluster/hash_slot.h"

#include <hiredis/hiredis.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace sluice {
namespace {

using testing::RedisServer;

struct KnownSlot {
  std::string key;
  int slot;
};

// Answers of CLUSTER KEYSLOT on Redis 7.0, including the hash tag edge cases.
const std::vector<KnownSlot>& KnownSlots() {
  static const auto* known = new std::vector<KnownSlot>{
      {"foo", 12182},
      {"bar", 5061},
      {"hello", 866},
      {"somekey", 11058},
      {"123456789", 12739},
      {"", 0},
      {"foo{hash_tag}", 2515},
      {"{user1000}.following", 3443},
      {"{user1000}.followers", 3443},
      {"foo{}{bar}", 8363},     // the first tag is empty: the whole key is hashed
      {"foo{{bar}}zap", 4015},  // the tag is "{bar"
      {"foo{bar}{zap}", 5061},  // the tag is "bar", the same slot as "bar"
      {"{}", 15257},
      {"}{", 12793},
      {"{", 4092},
      {"}", 12090},
      {"a{b", 13340},
      {"a}b{c}", 7365},
      {std::string("\xff\x00\xfe", 3), 434},
      {"\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87{\xe6\x97\xa5\xe6\x9c\xac}", 10949},  // "ключ{日本}"
  };
  return *known;
}

// Verifies the slots Redis itself computes for plain keys and every hash tag edge case.
TEST(HashSlotTest, MatchesKnownRedisSlots) {
  for (const KnownSlot& known : KnownSlots()) {
    EXPECT_EQ(HashSlot(known.key), known.slot) << "key '" << known.key << "'";
  }
}

// Verifies which part of a key is its hash tag.
TEST(HashSlotTest, ExtractsTheFirstNonEmptyTag) {
  EXPECT_EQ(HashTagOf("{user1000}.following"), "user1000");
  EXPECT_EQ(HashTagOf("foo{}{bar}"), "foo{}{bar}");
  EXPECT_EQ(HashTagOf("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(HashTagOf("foo{bar}{zap}"), "bar");
  EXPECT_EQ(HashTagOf("{}"), "{}");
  EXPECT_EQ(HashTagOf("}{"), "}{");
  EXPECT_EQ(HashTagOf("no tag"), "no tag");
  EXPECT_EQ(HashTagOf("open{only"), "open{only");
}

// Verifies keys sharing a tag share a slot, whatever surrounds the tag.
TEST(HashSlotTest, KeysWithTheSameTagShareASlot) {
  int slot = HashSlot("tenant-42");
  for (const char* key : {"{tenant-42}", "rl:{tenant-42}:a", "x{tenant-42}y{z}", "{tenant-42}}"}) {
    EXPECT_EQ(HashSlot(key), slot) << key;
  }
}

// Keys for the comparison against a real node: tags, tag-like noise, binary and UTF-8 bytes.
std::vector<std::string> RandomKeys(size_t count) {
  std::mt19937 rng(20240601);
  const std::string alphabet = "abcXYZ019{}:-_ \t\xc3\xa9\xe2\x82\xac";
  std::vector<std::string> keys;
  for (size_t i = 0; i < count; ++i) {
    std::string key;
    size_t length = rng() % 24;
    bool binary = i % 5 == 0;
    for (size_t k = 0; k < length; ++k) {
      key.push_back(binary ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()]);
    }
    keys.push_back(std::move(key));
  }
  return keys;
}

// Verifies HashSlot agrees with CLUSTER KEYSLOT of a real cluster-enabled redis-server for
// thousands of keys, pipelined over one connection.
TEST(HashSlotTest, AgreesWithClusterKeyslotOfARealNode) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(
      {.extra_config = {"cluster-enabled yes", "cluster-config-file nodes.conf"}});
  ASSERT_TRUE(server.ok()) << server.status();
  timeval timeout{5, 0};
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(
      redisConnectWithTimeout("127.0.0.1", (*server)->port(), timeout), &redisFree);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  redisSetTimeout(c.get(), timeout);
  std::vector<std::string> keys = RandomKeys(3000);
  for (const KnownSlot& known : KnownSlots()) {
    keys.push_back(known.key);
  }
  for (const std::string& key : keys) {
    const char* argv[] = {"CLUSTER", "KEYSLOT", key.data()};
    size_t lengths[] = {7, 7, key.size()};
    ASSERT_EQ(redisAppendCommandArgv(c.get(), 3, argv, lengths), REDIS_OK);
  }
  for (const std::string& key : keys) {
    void* raw = nullptr;
    ASSERT_EQ(redisGetReply(c.get(), &raw), REDIS_OK) << c->errstr;
    std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                       &freeReplyObject);
    ASSERT_EQ(reply->type, REDIS_REPLY_INTEGER);
    EXPECT_EQ(HashSlot(key), reply->integer) << "key of " << key.size() << " bytes";
  }
}

}  // namespace
}  // namespace sluice
