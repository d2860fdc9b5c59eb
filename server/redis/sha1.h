// SHA-1 (FIPS 180-4), used only to name Lua scripts the way Redis does: EVALSHA takes the
// lower-case hex SHA-1 of a script's source. Not for anything security-related.
// Pure functions with no state; safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

// The 20-byte SHA-1 digest of `data`.
std::array<uint8_t, 20> Sha1(std::string_view data);

// The digest of `data` as 40 lower-case hex characters, the form SCRIPT LOAD returns.
std::string Sha1Hex(std::string_view data);

}  // namespace sluice
