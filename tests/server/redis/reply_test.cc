#include "server/redis/reply.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/failure_reason.h"
#include "tests/support/heap_in_use.h"

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

  // What a RedisReplyReader made of `stream` fed `step` bytes at a time (Next called until
  // kNone after each Feed, as the connections do): the replies, and how it ended.
  struct Read {
    std::vector<RedisReply> replies;
    RedisReplyReader::Result last = RedisReplyReader::Result::kNone;
    std::string error;
  };
  static Read ReadStream(const std::string& stream, size_t step, RedisReplyLimits limits = {}) {
    RedisReplyReader reader(limits);
    Read read;
    for (size_t at = 0; at < stream.size(); at += step) {
      EXPECT_TRUE(reader.Feed(stream.data() + at, std::min(step, stream.size() - at)));
      while ((read.last = reader.Next()) == RedisReplyReader::Result::kReply) {
        read.replies.push_back(std::move(*reader.reply()));
      }
      if (read.last == RedisReplyReader::Result::kError) {
        read.error = reader.error();
        // Failed for good: what follows is dropped and the error stays.
        EXPECT_TRUE(reader.Feed("+OK\r\n", 5));
        EXPECT_EQ(reader.Next(), RedisReplyReader::Result::kError);
        EXPECT_EQ(reader.error(), read.error);
        break;
      }
    }
    return read;
  }
};

// Small limits, so that the cases below stay short: an array of 4, 10 values in a reply, 3
// arrays deep, strings of 8 bytes, 20 bytes of strings in a reply.
RedisReplyLimits SmallLimits() {
  RedisReplyLimits limits;
  limits.max_array_elements = 4;
  limits.max_reply_elements = 10;
  limits.max_nesting = 3;
  limits.max_string_bytes = 8;
  limits.max_reply_bytes = 20;
  return limits;
}

std::string Repeat(const std::string& part, size_t times) {
  std::string out;
  for (size_t i = 0; i < times; ++i) {
    out += part;
  }
  return out;
}

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

// Verifies an array announced huge and never sent allocates nothing for its count: with the
// limits out of the way, `*2000000000` followed by a few elements costs a few kilobytes, and
// at the default limits an announced count at the limit costs no more.
TEST_F(ReplyTest, AnnouncedCountsAllocateNothing) {
  RedisReplyLimits unlimited;
  unlimited.max_array_elements = size_t{1} << 31;
  unlimited.max_reply_elements = size_t{1} << 40;
  const struct {
    RedisReplyLimits limits;
    std::string stream;
  } cases[] = {
      {unlimited, "*2000000000\r\n:1\r\n*2000000000\r\n$1\r\na\r\n*1000000000\r\n"},
      {RedisReplyLimits{}, "*65536\r\n*65536\r\n:1\r\n*65536\r\n*65536\r\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.stream);
    const std::optional<int64_t> before = HeapInUse();
    RedisReplyReader reader(c.limits);
    ASSERT_TRUE(reader.Feed(c.stream.data(), c.stream.size()));
    ASSERT_EQ(reader.Next(), RedisReplyReader::Result::kNone) << reader.error();
    const std::optional<int64_t> after = HeapInUse();
    if (before.has_value() && after.has_value()) {
      // The reader, its 16 KB buffer, and 16 values reserved per array: well under 64 KB.
      EXPECT_LT(*after - *before, 64 * 1024);
    }
  }
}

// Verifies each limit: a reply past it is a kError naming the limit, whether it arrives whole
// or one byte at a time, and as soon as what announces it arrives (the string's length line,
// before its bytes); what the reader held is dropped and it stays failed.
TEST_F(ReplyTest, RefusesRepliesPastEachLimit) {
  RedisReplyLimits many_small_strings = SmallLimits();
  many_small_strings.max_string_bytes = 10;
  RedisReplyLimits deep = SmallLimits();
  deep.max_nesting = 100;
  const struct {
    const char* what;
    RedisReplyLimits limits;
    std::string stream;
    std::string error;
  } cases[] = {
      {"an array too long", SmallLimits(), "*5\r\n", "reply array of 5 elements; at most 4 "
                                                     "(RedisReplyLimits::max_array_elements)"},
      {"an array too long, nested", SmallLimits(), "*2\r\n:1\r\n*5\r\n",
       "RedisReplyLimits::max_array_elements"},
      {"the default limit", RedisReplyLimits{}, "*10000000\r\n",
       "reply array of 10000000 elements; at most 65536 (RedisReplyLimits::max_array_elements)"},
      {"a count hiredis takes", RedisReplyLimits{}, "*2000000000\r\n",
       "RedisReplyLimits::max_array_elements"},
      {"too many values in all", SmallLimits(), "*3\r\n*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n*4\r\n",
       "reply of at least 11 elements; at most 10 (RedisReplyLimits::max_reply_elements)"},
      {"nested too deep", SmallLimits(), "*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
       "reply arrays nested 4 deep; at most 3 (RedisReplyLimits::max_nesting)"},
      {"nested deeper than hiredis goes", deep, Repeat("*1\r\n", 9) + ":1\r\n",
       "No support for nested multi bulk replies"},
      {"a string's length", SmallLimits(), "$9\r\n",
       "reply string of 9 bytes; at most 8 (RedisReplyLimits::max_string_bytes)"},
      {"a string's length, hiredis' largest", RedisReplyLimits{}, "$2000000000\r\nabc",
       "reply string of 2000000000 bytes; at most 16777216 (RedisReplyLimits::max_string_bytes)"},
      {"a whole string", SmallLimits(), "*1\r\n$9\r\n123456789\r\n",
       "RedisReplyLimits::max_string_bytes"},
      {"a status", SmallLimits(), "+123456789\r\n", "RedisReplyLimits::max_string_bytes"},
      {"an error line unfinished", SmallLimits(), "-ERR 567890",
       "reply line of more than 8 bytes; at most 8 (RedisReplyLimits::max_string_bytes)"},
      {"strings in all, by their lengths", SmallLimits(),
       "*3\r\n$8\r\n12345678\r\n$8\r\n12345678\r\n$8\r\n",
       "reply of at least 24 bytes; at most 20 (RedisReplyLimits::max_reply_bytes)"},
      {"strings in all, a line unfinished", many_small_strings,
       "*3\r\n$8\r\n12345678\r\n$8\r\n12345678\r\n+12345",
       "reply of at least 21 bytes; at most 20 (RedisReplyLimits::max_reply_bytes)"},
      {"strings in all, whole", many_small_strings,
       "*3\r\n+12345678\r\n-0123456789\r\n+123\r\n",
       "reply of at least 21 bytes; at most 20 (RedisReplyLimits::max_reply_bytes)"},
      {"a length line that never ends", SmallLimits(), "*" + std::string(40, '1'),
       "reply length or integer line of more than 30 bytes"},
      {"an integer line that never ends", SmallLimits(), "*1\r\n:" + std::string(40, '1'),
       "reply length or integer line of more than 30 bytes"},
  };
  for (const auto& c : cases) {
    for (const size_t step : {c.stream.size(), size_t{1}}) {
      SCOPED_TRACE(absl::StrCat(c.what, step == 1 ? ", one byte at a time" : ", whole"));
      const Read read = ReadStream(c.stream, step, c.limits);
      EXPECT_TRUE(read.replies.empty());
      EXPECT_EQ(read.last, RedisReplyReader::Result::kError);
      EXPECT_THAT(read.error, ::testing::HasSubstr(c.error));
    }
  }
}

// Verifies replies right at each limit are read whole and right, in one piece and one byte at
// a time.
TEST_F(ReplyTest, AcceptsRepliesRightAtTheLimits) {
  const RedisReply one = RedisReply::Integer(1);
  const struct {
    const char* what;
    std::string stream;
    RedisReply expected;
  } cases[] = {
      {"an array of 4", "*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n", RedisReply::Array({one, one, one, one})},
      {"10 values in all", "*2\r\n*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n",
       RedisReply::Array({RedisReply::Array({one, one, one, one}),
                          RedisReply::Array({one, one, one, one})})},
      {"3 deep", "*1\r\n*1\r\n*1\r\n:1\r\n",
       RedisReply::Array({RedisReply::Array({RedisReply::Array({one})})})},
      {"a string of 8", "$8\r\n12345678\r\n", RedisReply::String("12345678")},
      {"an error of 8", "-ERR 5678\r\n", RedisReply::Error("ERR 5678")},
      {"20 bytes of strings", "*3\r\n$8\r\n12345678\r\n+12345678\r\n$4\r\n1234\r\n",
       RedisReply::Array({RedisReply::String("12345678"), RedisReply::Status("12345678"),
                          RedisReply::String("1234")})},
      {"the longest integer", ":-9223372036854775808\r\n",
       RedisReply::Integer(std::numeric_limits<int64_t>::min())},
  };
  for (const auto& c : cases) {
    for (const size_t step : {c.stream.size(), size_t{1}}) {
      SCOPED_TRACE(absl::StrCat(c.what, step == 1 ? ", one byte at a time" : ", whole"));
      // Twice in a row: each reply's counts start again from zero.
      const Read read = ReadStream(c.stream + c.stream, step, SmallLimits());
      EXPECT_EQ(read.last, RedisReplyReader::Result::kNone) << read.error;
      ASSERT_EQ(read.replies.size(), 2u);
      EXPECT_EQ(read.replies[0], c.expected);
      EXPECT_EQ(read.replies[1], c.expected);
    }
  }
  // hiredis' own limit: 8 arrays nested (the 9th is refused, above), whatever max_nesting says.
  RedisReplyLimits deep;
  deep.max_nesting = 100;
  const Read eight = ReadStream(Repeat("*1\r\n", 8) + ":1\r\n", 1, deep);
  EXPECT_EQ(eight.last, RedisReplyReader::Result::kNone) << eight.error;
  EXPECT_EQ(eight.replies.size(), 1u);
}

// Verifies the default limits take the largest replies Sluice reads: CLUSTER SLOTS of a cluster
// whose 16,384 slots are each a range of their own, with a master and two replicas each, every
// node with Redis 7's hostname and ip metadata; an array of max_array_elements; a string of
// max_string_bytes (a batch script's reply of 419,430 keys).
TEST_F(ReplyTest, DefaultLimitsTakeTheLargestRepliesSluiceReads) {
  auto bulk = [](const std::string& text) {
    return absl::StrCat("$", text.size(), "\r\n", text, "\r\n");
  };
  std::string slots = "*16384\r\n";
  for (int slot = 0; slot < 16384; ++slot) {
    const std::string bound = absl::StrCat(":", slot, "\r\n");
    slots += "*5\r\n" + bound + bound;
    for (int node = 0; node < 3; ++node) {
      const std::string ip = absl::StrCat("10.0.", slot % 100, ".", node);
      const std::string host = absl::StrCat("redis-", slot % 100, "-", node, ".example.internal");
      slots += absl::StrCat("*4\r\n", bulk(ip), ":6379\r\n", bulk(std::string(40, 'a' + node)),
                            "*4\r\n", bulk("hostname"), bulk(host), bulk("ip"), bulk(ip));
    }
  }
  const std::string wide = "*65536\r\n" + Repeat(":1\r\n", 65536);
  const size_t longest = RedisReplyLimits{}.max_string_bytes;
  const std::string script_reply =
      absl::StrCat("$", longest, "\r\n", std::string(longest, 'x'), "\r\n");
  const std::string* streams[] = {&slots, &wide, &script_reply};
  for (const std::string* stream : streams) {
    const Read read = ReadStream(*stream, 16 * 1024);
    EXPECT_EQ(read.last, RedisReplyReader::Result::kNone) << read.error;
    ASSERT_EQ(read.replies.size(), 1u);
    EXPECT_EQ(read.replies[0], Parse(*stream));
  }
}

// Verifies arrays that grow past what they reserved, nested in arrays that grow too, come out
// as hiredis reads them, however the stream is cut: whole, one byte at a time, and at random
// points.
TEST_F(ReplyTest, NestedArraysComeOutRightAsTheyGrow) {
  std::string stream = "*40\r\n";
  for (int i = 0; i < 40; ++i) {
    stream += absl::StrCat("*", i, "\r\n");
    for (int j = 0; j < i; ++j) {
      if (j % 3 == 0) {
        stream += absl::StrCat("*2\r\n$", j + 1, "\r\n", std::string(j + 1, 'a' + i % 26),
                               "\r\n*17\r\n", Repeat(absl::StrCat(":", j, "\r\n"), 17));
      } else if (j % 3 == 1) {
        stream += "$-1\r\n";
      } else {
        stream += absl::StrCat("+", std::string(j, 's'), "\r\n");
      }
    }
  }
  const RedisReply expected = Parse(stream);
  ASSERT_EQ(expected.elements().size(), 40u);
  for (const size_t step : {stream.size(), size_t{1}, size_t{7}}) {
    SCOPED_TRACE(step);
    const Read read = ReadStream(stream, step);
    EXPECT_EQ(read.last, RedisReplyReader::Result::kNone) << read.error;
    ASSERT_EQ(read.replies.size(), 1u);
    EXPECT_EQ(read.replies[0], expected);
  }
  std::mt19937 random(42);
  for (int round = 0; round < 20; ++round) {
    RedisReplyReader reader;
    std::vector<RedisReply> read;
    for (size_t at = 0; at < stream.size();) {
      const size_t size = std::min<size_t>(random() % 300 + 1, stream.size() - at);
      ASSERT_TRUE(reader.Feed(stream.data() + at, size));
      at += size;
      RedisReplyReader::Result result;
      while ((result = reader.Next()) == RedisReplyReader::Result::kReply) {
        read.push_back(std::move(*reader.reply()));
      }
      ASSERT_EQ(result, RedisReplyReader::Result::kNone) << reader.error();
    }
    ASSERT_EQ(read.size(), 1u);
    EXPECT_EQ(read[0], expected);
  }
}

// Verifies an error reply of any length becomes a status whose message is cut (and escaped),
// with its code and failure reason kept; and that LogString cuts a reply as it renders it.
TEST_F(ReplyTest, StatusesAndLogStringsFromRepliesAreCut) {
  const std::string huge(1 << 20, 'x');
  const absl::Status unavailable = ErrorReplyStatus(RedisReply::Error("READONLY " + huge));
  EXPECT_EQ(unavailable.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailureReasonOf(unavailable), FailureReason::kReadOnly);
  EXPECT_LT(unavailable.message().size(), 400u);
  EXPECT_THAT(std::string(unavailable.message()),
              ::testing::HasSubstr(absl::StrCat("(", huge.size() + 9, " bytes)")));
  const absl::Status refused = ErrorReplyStatus(RedisReply::Error("ERR sluice x\r\n\x1b" + huge));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_LT(refused.message().size(), 400u);
  EXPECT_THAT(std::string(refused.message()),
              ::testing::StartsWith("redis refused: ERR sluice x\\x0d\\x0a\\x1bxxx"));

  std::vector<RedisReply> many(100000, RedisReply::String(huge.substr(0, 100)));
  const std::string line = RedisReply::Array(std::move(many)).LogString();
  EXPECT_LT(line.size(), 600u);
  EXPECT_THAT(line, ::testing::HasSubstr("more)]"));
  EXPECT_EQ(RedisReply::Array({RedisReply::Integer(1), RedisReply::String("a\nb"),
                               RedisReply::Nil(), RedisReply::Error("ERR x")})
                .LogString(),
            "[1, \"a\\x0ab\", (nil), -ERR x]");
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
