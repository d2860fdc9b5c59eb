#include "server/memcached/server_placement.h"

#include <array>

namespace sluice {
namespace {

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) {
      c = (c & 1) != 0 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

// gomemcache copies the key into a 256-byte buffer before hashing it.
constexpr size_t kHashedKeyBytes = 256;

}  // namespace

uint32_t Crc32Ieee(absl::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (char c : data) {
    crc = kTable[(crc ^ static_cast<unsigned char>(c)) & 0xFF] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

size_t PickServer(absl::string_view key, size_t servers) {
  if (servers <= 1) {
    return 0;
  }
  return Crc32Ieee(key.substr(0, kHashedKeyBytes)) % static_cast<uint32_t>(servers);
}

}  // namespace sluice
