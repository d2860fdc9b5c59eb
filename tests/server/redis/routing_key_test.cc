#include "server/redis/routing_key.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/command.h"

namespace sluice {
namespace {

std::string Resp(const std::vector<std::string>& args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::string out;
  AppendRespCommand(views, &out);
  return out;
}

// The routing key of `args`, or "(none)".
std::string KeyOf(const std::vector<std::string>& args) {
  std::string resp = Resp(args);
  std::optional<RoutingKeyPosition> key = FindRoutingKey(resp);
  if (!key) {
    return "(none)";
  }
  return resp.substr(key->offset, key->length);
}

// Verifies ordinary commands route by their first argument, whatever the case of their name.
TEST(RoutingKeyTest, FirstArgumentForOrdinaryCommands) {
  EXPECT_EQ(KeyOf({"GET", "user:{42}"}), "user:{42}");
  EXPECT_EQ(KeyOf({"set", "k", "v", "PX", "100"}), "k");
  EXPECT_EQ(KeyOf({"INCRBY", "counter", "5"}), "counter");
  EXPECT_EQ(KeyOf({"MGET", "{t}a", "{t}b"}), "{t}a");
  EXPECT_EQ(KeyOf({"DEL", ""}), "");  // the empty key is a key
}

// Verifies EVAL-like commands route by their first key, and by nothing without keys.
TEST(RoutingKeyTest, FirstOfNumkeysForScripts) {
  std::string sha(40, 'a');
  EXPECT_EQ(KeyOf({"EVALSHA", sha, "2", "{a}1", "{a}2", "arg"}), "{a}1");
  EXPECT_EQ(KeyOf({"evalsha", sha, "1", "k"}), "k");
  EXPECT_EQ(KeyOf({"EVAL", "return 1", "0", "notakey"}), "(none)");
  EXPECT_EQ(KeyOf({"EVAL", "return 1", "0"}), "(none)");
  EXPECT_EQ(KeyOf({"FCALL", "f", "1", "k", "x"}), "k");
  EXPECT_EQ(KeyOf({"EVALSHA", sha, "x", "k"}), "(none)");  // malformed numkeys
}

// Verifies the commands that name their key second, and keyless server commands.
TEST(RoutingKeyTest, SecondArgumentAndKeylessCommands) {
  EXPECT_EQ(KeyOf({"OBJECT", "ENCODING", "k"}), "k");
  EXPECT_EQ(KeyOf({"MEMORY", "USAGE", "k"}), "k");
  EXPECT_EQ(KeyOf({"BITOP", "AND", "dest", "a", "b"}), "dest");
  for (std::vector<std::string> keyless :
       std::vector<std::vector<std::string>>{{"PING"},
                                             {"PING", "hello"},
                                             {"ASKING"},
                                             {"SCRIPT", "LOAD", "return 1"},
                                             {"CLUSTER", "SLOTS"},
                                             {"INFO", "replication"},
                                             {"DBSIZE"},
                                             {"GET"}}) {
    EXPECT_EQ(KeyOf(keyless), "(none)") << keyless[0];
  }
}

// Verifies binary keys and large arguments are located exactly.
TEST(RoutingKeyTest, LocatesBinaryKeysExactly) {
  std::string key("\r\n\0{x}\xff", 7);
  EXPECT_EQ(KeyOf({"SET", key, std::string(100000, 'v')}), key);
}

// Verifies malformed RESP yields no key rather than a wrong one.
TEST(RoutingKeyTest, RejectsMalformedResp) {
  for (std::string_view bad :
       {"", "PING\r\n", "*x\r\n", "*2\r\n$3\r\nGET\r\n", "*2\r\n$3\r\nGET\r\n$9\r\nab\r\n",
        "*2\r\n$3\r\nGET\r\n:1\r\n", "*-1\r\n"}) {
    EXPECT_FALSE(FindRoutingKey(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace sluice
