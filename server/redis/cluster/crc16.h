// CRC16 as Redis Cluster defines it for key hashing: CRC-16/XMODEM (polynomial 0x1021, initial
// value 0, no reflection, no final XOR); the cluster specification's test vector is
// Crc16("123456789") == 0x31C3.
// A pure function, safe from any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice {

uint16_t Crc16(std::string_view bytes);

}  // namespace sluice
