#include "server/redis/cluster/hash_slot.h"

#include "server/redis/cluster/crc16.h"

namespace sluice {

std::string_view HashTagOf(std::string_view key) {
  size_t open = key.find('{');
  if (open == std::string_view::npos) {
    return key;
  }
  size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) {
    return key;
  }
  return key.substr(open + 1, close - open - 1);
}

int HashSlot(std::string_view key) {
  // 16384 is a power of two: the modulo is a mask.
  return Crc16(HashTagOf(key)) & (kClusterSlots - 1);
}

}  // namespace sluice
