#include "server/memcached/server_placement.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

class ServerPlacementTest : public ::testing::Test {};

// Verifies the CRC is Go's crc32.ChecksumIEEE (the check value of CRC-32/ISO-HDLC, and values
// zlib.crc32 gives for upstream-format keys).
TEST_F(ServerPlacementTest, CrcIsIeee) {
  EXPECT_EQ(Crc32Ieee("123456789"), 0xCBF43926u);
  EXPECT_EQ(Crc32Ieee(""), 0u);
  EXPECT_EQ(Crc32Ieee("domain_key_value_1700000000"), 0xD5A097D1u);
  EXPECT_EQ(Crc32Ieee("d_k_v1_1795886880"), 0x06812DBFu);
}

// Verifies gomemcache's PickServer: the CRC modulo the servers, one server always the first,
// and only the first 256 bytes of a key hashed.
TEST_F(ServerPlacementTest, PicksAsGomemcache) {
  EXPECT_EQ(PickServer("domain_key_value_1700000000", 2), 1u);
  EXPECT_EQ(PickServer("domain_key_value_1700000000", 3), 1u);
  EXPECT_EQ(PickServer("domain_key_value_1700000000", 5), 3u);
  EXPECT_EQ(PickServer("d_k_v1_1795886880", 3), 2u);
  EXPECT_EQ(PickServer("anything", 1), 0u);
  const std::string long_key(300, 'a');
  EXPECT_EQ(PickServer(long_key, 3), 0u);  // 0xB07D3659 of the first 256 bytes, mod 3
  EXPECT_EQ(PickServer(long_key, 3), PickServer(long_key + "different tail", 3));
}

}  // namespace
}  // namespace sluice
