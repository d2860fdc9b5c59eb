#include "server/redis/command_batch.h"

#include <optional>
#include <string>
#include <string_view>

#include "gtest/gtest.h"
#include "server/redis/command.h"
#include "server/redis/routing_key.h"
#include "server/redis/script_cache.h"

namespace sluice {
namespace {

// Verifies every way of adding a command records its routing key, and keyless ones none.
TEST(CommandBatchTest, RecordsEachCommandsRoutingKey) {
  ScriptCache scripts;
  const RedisScript* script = *scripts.Register("s", "return 1");
  CommandBatch batch;
  batch.Add({"SET", "{a}key", "v"});
  batch.AddEvalSha(*script, {"{b}k1", "{b}k2"}, {"1", "2"});
  batch.AddEvalSha(*script, {}, {"1"});
  batch.Add(RedisCommand::FromArgs({"INCR", "c"}));
  batch.AddFormatted("*1\r\n$4\r\nPING\r\n", nullptr);
  batch.AddFormatted("*2\r\n$3\r\nGET\r\n$1\r\nz\r\n", nullptr);
  ASSERT_EQ(batch.size(), 6u);
  EXPECT_TRUE(batch.has_routing_key(0));
  EXPECT_EQ(batch.routing_key(0), "{a}key");
  EXPECT_TRUE(batch.has_routing_key(1));
  EXPECT_EQ(batch.routing_key(1), "{b}k1");
  EXPECT_FALSE(batch.has_routing_key(2));
  EXPECT_EQ(batch.routing_key(3), "c");
  EXPECT_FALSE(batch.has_routing_key(4));
  EXPECT_EQ(batch.routing_key(5), "z");
}

// Verifies AddEvalSha, which knows where it wrote the first key, records the same routing key as
// parsing the command finds, for keys whose length headers take one to three digits and for
// batches that already hold commands.
TEST(CommandBatchTest, EvalShaRoutingKeyMatchesTheParsedCommand) {
  ScriptCache scripts;
  const RedisScript* script = *scripts.Register("s", "return 1");
  CommandBatch batch;
  batch.Add({"PING"});
  for (size_t length : {0, 1, 9, 10, 99, 100, 300}) {
    const std::string key(length, 'k');
    const std::string other = "{tag}" + key;
    batch.AddEvalSha(*script, {key, other}, {"1", std::string(length, 'a')});
  }
  ASSERT_EQ(batch.size(), 8u);
  for (size_t i = 1; i < batch.size(); ++i) {
    const std::optional<RoutingKeyPosition> parsed = FindRoutingKey(batch.resp(i));
    ASSERT_TRUE(parsed.has_value()) << i;
    EXPECT_TRUE(batch.has_routing_key(i)) << i;
    EXPECT_EQ(batch.routing_key(i), batch.resp(i).substr(parsed->offset, parsed->length)) << i;
  }
}

// Verifies AddFrom copies a command's bytes, script and routing key into another batch.
TEST(CommandBatchTest, AddFromCopiesOneCommand) {
  ScriptCache scripts;
  const RedisScript* script = *scripts.Register("s", "return 1");
  CommandBatch source;
  source.Add({"GET", "first"});
  source.AddEvalSha(*script, {"{t}k"}, {"9"});
  CommandBatch copy;
  copy.Add({"PING"});
  copy.AddFrom(source, 1);
  ASSERT_EQ(copy.size(), 2u);
  EXPECT_EQ(copy.resp(1), source.resp(1));
  EXPECT_EQ(copy.script(1), script);
  EXPECT_TRUE(copy.has_routing_key(1));
  EXPECT_EQ(copy.routing_key(1), "{t}k");
  EXPECT_FALSE(copy.has_routing_key(0));
}

}  // namespace
}  // namespace sluice
