#include "server/redis/sha1.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace sluice {
namespace {

// Verifies the FIPS 180-4 / NIST example vectors.
TEST(Sha1Test, MatchesNistVectors) {
  EXPECT_EQ(Sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(Sha1Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                    "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "a49b2446a02c645bf419f995b67091253a04a259");
  EXPECT_EQ(Sha1Hex(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

// Verifies the raw digest and the hex form agree.
TEST(Sha1Test, RawDigestMatchesHex) {
  std::array<uint8_t, 20> digest = Sha1("abc");
  EXPECT_EQ(digest[0], 0xa9);
  EXPECT_EQ(digest[19], 0x9d);
}

// Verifies agreement with Redis' own SHA-1 (SCRIPT LOAD) for every length around the padding
// boundaries (55/56 and 119/120 bytes), which is what EVALSHA relies on.
TEST(Sha1Test, AgreesWithRedisScriptLoad) {
  absl::StatusOr<std::unique_ptr<testing::RedisServer>> server = testing::RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  for (size_t length = 8; length <= 140; ++length) {
    // A valid Lua chunk of exactly `length` bytes: "return 1" and trailing blanks.
    std::string script = "return 1";
    script.resize(length, ' ');
    absl::StatusOr<std::string> sha = (*server)->Command({"SCRIPT", "LOAD", script});
    ASSERT_TRUE(sha.ok()) << sha.status() << " for length " << length;
    EXPECT_EQ(Sha1Hex(script), *sha) << "length " << length;
  }
}

}  // namespace
}  // namespace sluice
