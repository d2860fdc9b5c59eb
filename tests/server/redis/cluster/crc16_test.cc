#include "server/redis/cluster/crc16.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// Verifies the check value the Redis Cluster specification gives for its CRC16.
TEST(Crc16Test, MatchesTheClusterSpecificationVector) { EXPECT_EQ(Crc16("123456789"), 0x31C3); }

// Verifies the empty input and single bytes, including the high bit, against the XMODEM
// definition computed bit by bit.
TEST(Crc16Test, MatchesBitwiseXmodemOnEveryByte) {
  EXPECT_EQ(Crc16(""), 0);
  for (int byte = 0; byte < 256; ++byte) {
    uint16_t crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
    std::string one(1, static_cast<char>(byte));
    EXPECT_EQ(Crc16(one), crc) << "byte " << byte;
  }
}

// Verifies embedded NUL bytes are hashed, not treated as the end of the input.
TEST(Crc16Test, HashesEmbeddedNulBytes) {
  EXPECT_NE(Crc16(std::string("a\0b", 3)), Crc16("a"));
  EXPECT_NE(Crc16(std::string("a\0", 2)), Crc16("a"));
}

}  // namespace
}  // namespace sluice
