// Counter arithmetic that a peer's numbers cannot wrap: a sum past the type's maximum stays there.
#pragma once

#include <cstdint>
#include <limits>

namespace sluice {

inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

}  // namespace sluice
