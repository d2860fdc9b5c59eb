#include "server/redis/cluster/cluster_error.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

ClusterError Parse(std::string text, std::string_view from = "10.0.0.9:7000") {
  return ParseClusterError(RedisReply::Error(std::move(text)), from);
}

// Verifies MOVED and ASK yield the slot and the node to go to.
TEST(ClusterErrorTest, ParsesMovedAndAsk) {
  ClusterError moved = Parse("MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(moved.kind, ClusterErrorKind::kMoved);
  EXPECT_EQ(moved.slot, 3999);
  EXPECT_EQ(moved.address, "127.0.0.1:6381");
  ClusterError ask = Parse("ASK 0 10.1.2.3:7002");
  EXPECT_EQ(ask.kind, ClusterErrorKind::kAsk);
  EXPECT_EQ(ask.slot, 0);
  EXPECT_EQ(ask.address, "10.1.2.3:7002");
}

// Verifies an empty host means the replying node's host, and IPv6 hosts get brackets.
TEST(ClusterErrorTest, FillsInUnknownHostsAndBracketsIpv6) {
  EXPECT_EQ(Parse("MOVED 5 :7005").address, "10.0.0.9:7005");
  EXPECT_EQ(Parse("MOVED 5 :7005", "[::1]:7000").address, "[::1]:7005");
  EXPECT_EQ(Parse("MOVED 5 2001:db8::7:7005").address, "[2001:db8::7]:7005");
}

// Verifies the retryable cluster states are recognized.
TEST(ClusterErrorTest, ClassifiesRetryableStates) {
  EXPECT_EQ(Parse("TRYAGAIN Multiple keys request during rehashing of slot").kind,
            ClusterErrorKind::kTryAgain);
  EXPECT_EQ(Parse("CLUSTERDOWN The cluster is down").kind, ClusterErrorKind::kClusterDown);
  EXPECT_EQ(Parse("CLUSTERDOWN Hash slot not served").kind, ClusterErrorKind::kClusterDown);
  EXPECT_EQ(Parse("LOADING Redis is loading the dataset in memory").kind,
            ClusterErrorKind::kNodeNotServing);
  EXPECT_EQ(Parse("READONLY You can't write against a read only replica.").kind,
            ClusterErrorKind::kNodeNotServing);
}

// Verifies real errors, malformed redirects and non-errors are left for the caller.
TEST(ClusterErrorTest, LeavesEverythingElseToTheCaller) {
  EXPECT_EQ(Parse("WRONGTYPE Operation against a key holding the wrong kind of value").kind,
            ClusterErrorKind::kNone);
  EXPECT_EQ(Parse("ERR Error running script: user_script:1: boom").kind, ClusterErrorKind::kNone);
  EXPECT_EQ(Parse("OOM command not allowed").kind, ClusterErrorKind::kNone);
  EXPECT_EQ(Parse("NOSCRIPT No matching script").kind, ClusterErrorKind::kNone);
  for (const char* bad : {"MOVED", "MOVED 3999", "MOVED x 1.2.3.4:5", "MOVED 16384 1.2.3.4:5",
                          "MOVED 1 1.2.3.4", "MOVED 1 1.2.3.4:0", "ASK 1 host:99999"}) {
    EXPECT_EQ(Parse(bad).kind, ClusterErrorKind::kNone) << bad;
  }
  // A host that cannot be a host name is no redirect: Sluice would connect to it and name it.
  for (const char* bad : {"MOVED 1 evil\nline:5", "ASK 1 \x1b[31m:5", "MOVED 1 a\x80" "b:5"}) {
    EXPECT_EQ(Parse(bad).kind, ClusterErrorKind::kNone) << bad;
  }
  EXPECT_EQ(ParseClusterError(RedisReply::Status("MOVED 1 1.2.3.4:5"), "").kind,
            ClusterErrorKind::kNone);
  EXPECT_EQ(ParseClusterError(RedisReply::String("ASK 1 1.2.3.4:5"), "").kind,
            ClusterErrorKind::kNone);
}

}  // namespace
}  // namespace sluice
