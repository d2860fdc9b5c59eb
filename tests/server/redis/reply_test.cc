#include "server/redis/reply.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// Parses RESP bytes with hiredis' own reader, so the conversion is tested on real redisReply
// trees rather than hand-built ones.
class ReplyTest : public ::testing::Test {
 protected:
  RedisReply Parse(const std::string& resp) {
    std::unique_ptr<redisReader, decltype(&redisReaderFree)> reader(redisReaderCreate(),
                                                                    &redisReaderFree);
    EXPECT_EQ(redisReaderFeed(reader.get(), resp.data(), resp.size()), REDIS_OK);
    void* raw = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader.get(), &raw), REDIS_OK);
    EXPECT_NE(raw, nullptr);
    if (raw == nullptr) {
      return RedisReply();
    }
    RedisReply reply = RedisReply::FromHiredis(*static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    return reply;
  }
};

// Verifies each scalar type converts with its value.
TEST_F(ReplyTest, ConvertsScalars) {
  EXPECT_EQ(Parse("+OK\r\n"), RedisReply::Status("OK"));
  EXPECT_EQ(Parse("-ERR wrong\r\n"), RedisReply::Error("ERR wrong"));
  EXPECT_EQ(Parse(":-42\r\n"), RedisReply::Integer(-42));
  EXPECT_EQ(Parse("$-1\r\n"), RedisReply::Nil());
  EXPECT_EQ(Parse("$0\r\n\r\n"), RedisReply::String(""));
  RedisReply binary = Parse(std::string("$5\r\na\0b\r\n\r\n", 11));
  ASSERT_TRUE(binary.is_string());
  EXPECT_EQ(binary.str(), std::string("a\0b\r\n", 5));
}

// Verifies nested arrays keep their order and element types; a null array is nil.
TEST_F(ReplyTest, ConvertsNestedArrays) {
  RedisReply reply = Parse("*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n-NOSCRIPT No matching\r\n");
  RedisReply expected = RedisReply::Array(
      {RedisReply::Integer(1), RedisReply::Array({RedisReply::String("a"), RedisReply::Nil()}),
       RedisReply::Error("NOSCRIPT No matching")});
  EXPECT_EQ(reply, expected);
  EXPECT_EQ(reply.elements().size(), 3u);
  EXPECT_EQ(Parse("*0\r\n"), RedisReply::Array({}));
  EXPECT_TRUE(Parse("*-1\r\n").is_nil());
}

// Verifies RedisReplyReader reads what hiredis' own reader and FromHiredis read, from the whole
// stream at once and from one byte at a time; replies are handed out one by one, in order.
TEST_F(ReplyTest, ReaderBuildsTheSameRepliesAsHiredis) {
  const std::vector<std::string> replies = {
      "+OK\r\n", "-ERR wrong\r\n", ":-42\r\n", "$-1\r\n", "$0\r\n\r\n",
      std::string("$5\r\na\0b\r\n\r\n", 11),
      "$40\r\n0123456789012345678901234567890123456789\r\n",
      "*3\r\n:1\r\n*2\r\n$1\r\na\r\n*1\r\n$-1\r\n-NOSCRIPT No matching\r\n", "*0\r\n", "*-1\r\n",
      "*2\r\n*0\r\n+x\r\n"};
  std::string stream;
  for (const std::string& r : replies) {
    stream += r;
  }
  for (const bool bytewise : {false, true}) {
    SCOPED_TRACE(bytewise ? "one byte at a time" : "all at once");
    RedisReplyReader reader;
    std::vector<RedisReply> read;
    const size_t step = bytewise ? 1 : stream.size();
    for (size_t at = 0; at < stream.size(); at += step) {
      ASSERT_TRUE(reader.Feed(stream.data() + at, std::min(step, stream.size() - at)));
      RedisReplyReader::Result result;
      while ((result = reader.Next()) == RedisReplyReader::Result::kReply) {
        read.push_back(std::move(*reader.reply()));
      }
      ASSERT_EQ(result, RedisReplyReader::Result::kNone);
    }
    ASSERT_EQ(read.size(), replies.size());
    for (size_t i = 0; i < replies.size(); ++i) {
      EXPECT_EQ(read[i], Parse(replies[i])) << "reply " << i;
    }
  }
}

// Verifies a stream that is not RESP is an error that says so, after the replies before it,
// and that a reply cut short by it is dropped whole (nothing leaks: the suite runs under ASan).
TEST_F(ReplyTest, ReaderRefusesAStreamThatIsNotResp) {
  RedisReplyReader reader;
  const std::string stream = ":7\r\n*2\r\n$3\r\nabc\r\n!nonsense\r\n";
  ASSERT_TRUE(reader.Feed(stream.data(), stream.size()));
  ASSERT_EQ(reader.Next(), RedisReplyReader::Result::kReply);
  EXPECT_EQ(*reader.reply(), RedisReply::Integer(7));
  EXPECT_EQ(reader.Next(), RedisReplyReader::Result::kError);
  EXPECT_THAT(std::string(reader.error()), ::testing::HasSubstr("Protocol error"));
}

// Verifies a reader freed with a reply half read frees it (ASan would report a leak).
TEST_F(ReplyTest, ReaderFreesAReplyHalfRead) {
  RedisReplyReader reader;
  const std::string stream = "*3\r\n$40\r\n0123456789012345678901234567890123456789\r\n:1\r\n";
  ASSERT_TRUE(reader.Feed(stream.data(), stream.size()));
  EXPECT_EQ(reader.Next(), RedisReplyReader::Result::kNone);
}

// Verifies the error code is the first word of an error and empty otherwise.
TEST_F(ReplyTest, ErrorCodeIsFirstWord) {
  EXPECT_EQ(RedisReply::Error("MOVED 3999 127.0.0.1:6381").ErrorCode(), "MOVED");
  EXPECT_EQ(RedisReply::Error("NOSCRIPT").ErrorCode(), "NOSCRIPT");
  EXPECT_EQ(RedisReply::Status("OK").ErrorCode(), "");
  EXPECT_EQ(RedisReply::Integer(1).ErrorCode(), "");
}

// Verifies equality distinguishes types with the same text and the debug form is readable.
TEST_F(ReplyTest, EqualityAndDebugString) {
  EXPECT_NE(RedisReply::Status("OK"), RedisReply::String("OK"));
  EXPECT_NE(RedisReply::Integer(0), RedisReply::Nil());
  EXPECT_EQ(RedisReply::Array({RedisReply::Integer(1), RedisReply::String("a"), RedisReply::Nil(),
                               RedisReply::Error("ERR x"), RedisReply::Status("OK")})
                .DebugString(),
            "[1, \"a\", (nil), -ERR x, +OK]");
}

}  // namespace
}  // namespace sluice
