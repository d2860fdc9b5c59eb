// The heap in use as glibc's malloc reports it, for tests that check a byte account against
// the allocator. Call it from a test's only allocating thread.
#pragma once

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <optional>

#include "tests/support/sanitizers.h"

namespace sluice {

// Bytes in use in the heap (arena blocks plus separately mapped ones), or nullopt when malloc is
// not glibc's own (a sanitizer replaces it, and its mallinfo2 reports nothing useful).
//
// glibc's per-thread cache keeps up to 7 freed blocks of each size up to about 1 KiB, and
// mallinfo2 counts them as in use: what a test freed just before could read as up to 235 KB
// still held. So that two readings differ by exactly what was allocated between them, each
// reading first fills every size's cache (7 blocks allocated, then freed): the cache then holds
// the same blocks' worth at every reading.
inline std::optional<int64_t> HeapInUse() {
#if SLUICE_TEST_SANITIZED
  return std::nullopt;
#endif
  constexpr int kCachedPerSize = 7;
  constexpr int kCachedSizes = 64;  // blocks of 32, 48, ... 1040 bytes
  void* blocks[kCachedSizes * kCachedPerSize];
  for (int size = 0; size < kCachedSizes; ++size) {
    for (int i = 0; i < kCachedPerSize; ++i) {
      blocks[size * kCachedPerSize + i] = std::malloc(static_cast<size_t>(24 + 16 * size));
    }
  }
  for (void* block : blocks) {
    std::free(block);
  }
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

}  // namespace sluice
