#include "server/redis/sha1.h"

#include <cstring>

namespace sluice {
namespace {

constexpr size_t kBlockBytes = 64;

uint32_t RotateLeft(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

// FIPS 180-4 section 6.1.2: processes one 512-bit block into the running hash `h`.
void ProcessBlock(const uint8_t* block, uint32_t h[5]) {
  uint32_t w[80];
  for (int t = 0; t < 16; ++t) {
    w[t] = (static_cast<uint32_t>(block[4 * t]) << 24) |
           (static_cast<uint32_t>(block[4 * t + 1]) << 16) |
           (static_cast<uint32_t>(block[4 * t + 2]) << 8) | static_cast<uint32_t>(block[4 * t + 3]);
  }
  for (int t = 16; t < 80; ++t) {
    w[t] = RotateLeft(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
  }
  uint32_t a = h[0];
  uint32_t b = h[1];
  uint32_t c = h[2];
  uint32_t d = h[3];
  uint32_t e = h[4];
  for (int t = 0; t < 80; ++t) {
    uint32_t f;
    uint32_t k;
    if (t < 20) {
      f = (b & c) | (~b & d);  // Ch
      k = 0x5a827999;
    } else if (t < 40) {
      f = b ^ c ^ d;  // Parity
      k = 0x6ed9eba1;
    } else if (t < 60) {
      f = (b & c) | (b & d) | (c & d);  // Maj
      k = 0x8f1bbcdc;
    } else {
      f = b ^ c ^ d;  // Parity
      k = 0xca62c1d6;
    }
    uint32_t temp = RotateLeft(a, 5) + f + e + k + w[t];
    e = d;
    d = c;
    c = RotateLeft(b, 30);
    b = a;
    a = temp;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

}  // namespace

std::array<uint8_t, 20> Sha1(std::string_view data) {
  uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  size_t full_blocks = data.size() / kBlockBytes;
  for (size_t i = 0; i < full_blocks; ++i) {
    ProcessBlock(bytes + i * kBlockBytes, h);
  }

  // Padding (section 5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, then the message length in
  // bits as a 64-bit big-endian integer. That is one or two more blocks.
  uint8_t tail[2 * kBlockBytes] = {};
  size_t rest = data.size() - full_blocks * kBlockBytes;
  if (rest > 0) {
    std::memcpy(tail, bytes + full_blocks * kBlockBytes, rest);
  }
  tail[rest] = 0x80;
  size_t tail_bytes = rest + 1 + 8 <= kBlockBytes ? kBlockBytes : 2 * kBlockBytes;
  uint64_t bit_length = static_cast<uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i) {
    tail[tail_bytes - 1 - i] = static_cast<uint8_t>(bit_length >> (8 * i));
  }
  for (size_t offset = 0; offset < tail_bytes; offset += kBlockBytes) {
    ProcessBlock(tail + offset, h);
  }

  std::array<uint8_t, 20> digest;
  for (int i = 0; i < 5; ++i) {
    digest[4 * i] = static_cast<uint8_t>(h[i] >> 24);
    digest[4 * i + 1] = static_cast<uint8_t>(h[i] >> 16);
    digest[4 * i + 2] = static_cast<uint8_t>(h[i] >> 8);
    digest[4 * i + 3] = static_cast<uint8_t>(h[i]);
  }
  return digest;
}

std::string Sha1Hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::array<uint8_t, 20> digest = Sha1(data);
  std::string hex(40, '\0');
  for (size_t i = 0; i < digest.size(); ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return hex;
}

}  // namespace sluice
