// Which of Redis Cluster's 16384 hash slots a key belongs to: CRC16 of the key modulo 16384,
// where a key with a hash tag hashes only the tag. The tag is what lies between the first '{'
// and the first '}' after it, provided that is not empty; "{}" and a '{' without a later '}'
// leave the whole key hashed. So "{user1000}.following" and "{user1000}.followers" share a slot,
// and "foo{}{bar}" hashes all of "foo{}{bar}".
// Pure functions, safe from any thread.
#pragma once

#include <string_view>

namespace sluice {

inline constexpr int kClusterSlots = 16384;

// The bytes of `key` that pick its slot: the hash tag if it has one, else the whole key.
// The result points into `key`.
std::string_view HashTagOf(std::string_view key);

// The key's slot, in [0, kClusterSlots).
int HashSlot(std::string_view key);

}  // namespace sluice
