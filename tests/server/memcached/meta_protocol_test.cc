#include "server/memcached/meta_protocol.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

class MetaProtocolTest : public ::testing::Test {
 protected:
  MetaReplyReader::Result Read(const std::string& bytes, MetaReply* reply) {
    reader_.Feed(bytes.data(), bytes.size());
    return reader_.Next(reply);
  }
  MetaReplyReader reader_;
};

// Verifies the commands of a fixed window, as memcached 1.6's meta protocol spells them.
TEST_F(MetaProtocolTest, EncodesTheWindowsCommands) {
  std::string out;
  AppendIncrementOrCreate("d_k_v_60", 3, 61, &out);
  AppendDecrement("d_k_v_60", 2, &out);
  AppendGetValue("d_k_v_60", &out);
  AppendNoOp(&out);
  EXPECT_EQ(out,
            "ma d_k_v_60 N61 J3 D3 v\r\nma d_k_v_60 MD D2 v\r\nmg d_k_v_60 v\r\nmn\r\n");
}

// Verifies keys memcached (and gomemcache) would refuse, and TTLs past 30 days given as a Unix
// time.
TEST_F(MetaProtocolTest, KeysAndExpiries) {
  EXPECT_TRUE(IsLegalMemcachedKey("d_k_v_1"));
  EXPECT_FALSE(IsLegalMemcachedKey("d_k_a b_1"));
  EXPECT_FALSE(IsLegalMemcachedKey(std::string("d\x7f", 2)));
  EXPECT_FALSE(IsLegalMemcachedKey(std::string(251, 'a')));
  EXPECT_TRUE(IsLegalMemcachedKey(std::string(250, 'a')));
  EXPECT_EQ(MemcachedExpiry(61, 1000), 61);
  EXPECT_EQ(MemcachedExpiry(2592000, 1000), 2592000);
  EXPECT_EQ(MemcachedExpiry(31536001, 1000), 31537001);
  EXPECT_EQ(MemcachedExpiry(0, 1000), 1);
}

// Verifies each reply kind, a value split over reads, and a decremented value's padding.
TEST_F(MetaProtocolTest, ReadsReplies) {
  MetaReply reply;
  ASSERT_EQ(Read("VA 2 t60\r\n1", &reply), MetaReplyReader::Result::kNone);
  ASSERT_EQ(Read("2\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kValue);
  EXPECT_EQ(reply.value, 12u);
  EXPECT_TRUE(reply.numeric);
  ASSERT_EQ(Read("VA 2\r\n0 \r\nNF\r\nEN\r\nMN\r\nSERVER_ERROR out of memory\r\n", &reply),
            MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.value, 0u);
  EXPECT_TRUE(reply.numeric);
  ASSERT_EQ(reader_.Next(&reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kNotFound);
  ASSERT_EQ(reader_.Next(&reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kNotFound);
  ASSERT_EQ(reader_.Next(&reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kOther);
  ASSERT_EQ(reader_.Next(&reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kError);
  EXPECT_EQ(reply.error, "SERVER_ERROR out of memory");
  EXPECT_EQ(reader_.Next(&reply), MetaReplyReader::Result::kNone);
}

// Verifies a value that is not a number (someone else's item) is read whole and marked so.
TEST_F(MetaProtocolTest, NonNumericValue) {
  MetaReply reply;
  ASSERT_EQ(Read("VA 5\r\nhello\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_FALSE(reply.numeric);
  EXPECT_EQ(reply.value, 0u);
}

// Verifies bytes memcached never sends, and bounds passed, stop the reader.
TEST_F(MetaProtocolTest, RefusesWhatMemcachedDoesNotSend) {
  MetaReply reply;
  EXPECT_EQ(Read("+OK\r\n", &reply), MetaReplyReader::Result::kError);
  MetaReplyReader huge;
  const std::string value = "VA 99999999999\r\n";
  huge.Feed(value.data(), value.size());
  EXPECT_EQ(huge.Next(&reply), MetaReplyReader::Result::kError);
  MetaReplyReader endless;
  const std::string line(2000, 'V');
  endless.Feed(line.data(), line.size());
  EXPECT_EQ(endless.Next(&reply), MetaReplyReader::Result::kError);
  MetaReplyReader unterminated;
  const std::string bad = "VA 1\r\n1XX";
  unterminated.Feed(bad.data(), bad.size());
  EXPECT_EQ(unterminated.Next(&reply), MetaReplyReader::Result::kError);
}

// Verifies a line of the longest length is read when a read ends between its CR and its LF, as
// when it comes whole (memcached_reply_fuzz checks cut against whole reads).
TEST_F(MetaProtocolTest, LongestLineCutBetweenCrAndLf) {
  MetaReply reply;
  const std::string line = "HD" + std::string(MetaReplyReader::kMaxLineBytes - 2, ' ');
  ASSERT_EQ(Read(line + "\r", &reply), MetaReplyReader::Result::kNone);
  ASSERT_EQ(Read("\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kOther);
  MetaReplyReader longer;
  const std::string too_long = "HD" + std::string(MetaReplyReader::kMaxLineBytes - 1, ' ') + "\r";
  longer.Feed(too_long.data(), too_long.size());
  EXPECT_EQ(longer.Next(&reply), MetaReplyReader::Result::kError);
}

// Verifies a value's size is the first word after VA, however many spaces stand around it.
TEST_F(MetaProtocolTest, ValueSizeAmidSpaces) {
  MetaReply reply;
  ASSERT_EQ(Read("VA   2  t60 f0\r\n17\r\nVA\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.value, 17u);
  EXPECT_EQ(reader_.Next(&reply), MetaReplyReader::Result::kError);
}

// Verifies the admin API's commands, and that a value's "t" flag is read as its TTL (-1: none),
// absent without it.
TEST_F(MetaProtocolTest, ReadsTheTtlFlagAndEncodesInspectAndDelete) {
  std::string out;
  AppendGetValueAndTtl("d_k_v_60", &out);
  AppendDelete("d_k_v_60", &out);
  EXPECT_EQ(out, "mg d_k_v_60 v t\r\nmd d_k_v_60\r\n");
  MetaReply reply;
  ASSERT_EQ(Read("VA 1 t59\r\n4\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.value, 4u);
  EXPECT_EQ(reply.ttl_seconds, 59);
  ASSERT_EQ(Read("VA 1 t-1\r\n4\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.ttl_seconds, -1);
  ASSERT_EQ(Read("VA 1\r\n4\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_FALSE(reply.ttl_seconds.has_value());
  ASSERT_EQ(Read("HD\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kOther);
  ASSERT_EQ(Read("NF\r\n", &reply), MetaReplyReader::Result::kReply);
  EXPECT_EQ(reply.kind, MetaReply::Kind::kNotFound);
}

}  // namespace
}  // namespace sluice
