#include "server/redis/command.h"

#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis/command_batch.h"
#include "server/redis/script_cache.h"

namespace sluice {
namespace {

// hiredis' formatter, as the reference for ours.
std::string HiredisFormat(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* out = nullptr;
  int length =
      redisFormatCommandArgv(&out, static_cast<int>(args.size()), argv.data(), lengths.data());
  std::string formatted(out, static_cast<size_t>(length));
  redisFreeCommand(out);
  return formatted;
}

std::vector<std::string_view> Views(const std::vector<std::string>& args) {
  return std::vector<std::string_view>(args.begin(), args.end());
}

// Verifies the RESP encoding matches hiredis' byte for byte, binary arguments included.
TEST(CommandTest, FormatsLikeHiredis) {
  std::vector<std::vector<std::string>> cases = {
      {"PING"},
      {"SET", "key", "value"},
      {"SET", "k", ""},
      {"SET", std::string("a\0\r\nb", 5), std::string(1000, 'x')},
  };
  for (const auto& args : cases) {
    std::string ours;
    AppendRespCommand(Views(args), &ours);
    EXPECT_EQ(ours, HiredisFormat(args));
    EXPECT_EQ(RedisCommand::FromArgs(Views(args)).resp(), HiredisFormat(args));
  }
}

// Verifies EVALSHA carries sha, key count, keys then args, and remembers its script.
TEST(CommandTest, BuildsEvalSha) {
  ScriptCache cache;
  const RedisScript* script = *cache.Register("echo", "return ARGV[1]");
  std::vector<std::string> keys = {"k1", "k2"};
  std::vector<std::string> args = {"10", "", "x"};
  RedisCommand command = RedisCommand::EvalSha(*script, Views(keys), Views(args));
  EXPECT_EQ(command.resp(),
            HiredisFormat({"EVALSHA", script->sha1(), "2", "k1", "k2", "10", "", "x"}));
  EXPECT_EQ(command.script(), script);
  EXPECT_EQ(RedisCommand::FromArgs({"GET", "k"}).script(), nullptr);

  std::string twelve_keys;
  std::vector<std::string> many(12, "k");
  AppendEvalShaCommand(script->sha1(), Views(many), {}, &twelve_keys);
  std::vector<std::string> expected = {"EVALSHA", script->sha1(), "12"};
  expected.insert(expected.end(), many.begin(), many.end());
  EXPECT_EQ(twelve_keys, HiredisFormat(expected));
}

// Verifies a batch keeps each command's bytes and script apart, and copies between batches.
TEST(CommandBatchTest, KeepsCommandsApart) {
  ScriptCache cache;
  const RedisScript* script = *cache.Register("one", "return 1");
  CommandBatch batch;
  batch.Reserve(4, 256);
  batch.Add({"SET", "a", "1"})
      .AddEvalSha(*script, {"k"}, {"5"})
      .Add(RedisCommand::FromArgs({"GET", "a"}));
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch.resp(0), HiredisFormat({"SET", "a", "1"}));
  EXPECT_EQ(batch.resp(1), HiredisFormat({"EVALSHA", script->sha1(), "1", "k", "5"}));
  EXPECT_EQ(batch.resp(2), HiredisFormat({"GET", "a"}));
  EXPECT_EQ(batch.script(0), nullptr);
  EXPECT_EQ(batch.script(1), script);
  EXPECT_EQ(batch.bytes(), batch.resp(0).size() + batch.resp(1).size() + batch.resp(2).size());

  CommandBatch retry;
  retry.AddFormatted(batch.resp(1), batch.script(1));
  EXPECT_EQ(retry.resp(0), batch.resp(1));
  EXPECT_EQ(retry.script(0), script);

  batch.Clear();
  EXPECT_TRUE(batch.empty());
}

}  // namespace
}  // namespace sluice
