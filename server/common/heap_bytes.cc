#include "server/common/heap_bytes.h"

#include <algorithm>
#include <cstdint>

namespace sluice {
namespace {

constexpr size_t kMallocHeader = 8;
constexpr size_t kMallocAlign = 16;
constexpr size_t kMallocMinBlock = 32;
constexpr size_t kMmapThreshold = size_t{128} << 10;
constexpr size_t kPageBytes = 4096;
// abseil's control bytes: one per slot, a sentinel, and a group (16 with SSE2) minus one cloned
// at the end so that a probe can read a whole group from any slot.
constexpr size_t kSwissGroupWidth = 16;

size_t RoundUp(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

size_t HeapBlockBytes(size_t n) {
  if (n == 0) {
    return 0;
  }
  const size_t block = std::max(kMallocMinBlock, RoundUp(n + kMallocHeader, kMallocAlign));
  if (block < kMmapThreshold) {
    return block;
  }
  // glibc raises its mmap threshold as mapped blocks are freed, so a large block may also sit
  // in the heap; the mapped size is the larger of the two, so it is the one counted.
  return RoundUp(block + kMallocHeader, kPageBytes);
}

size_t StringHeapBytes(const std::string& s) {
  const char* data = s.data();
  const char* object = reinterpret_cast<const char*>(&s);
  if (data >= object && data < object + sizeof(s)) {
    return 0;
  }
  return HeapBlockBytes(s.capacity() + 1);
}

size_t SwissTableBytes(size_t capacity, size_t slot_size, size_t slot_align) {
  if (capacity == 0) {
    return 0;
  }
  const size_t control = RoundUp(capacity + 1 + (kSwissGroupWidth - 1), slot_align);
  return HeapBlockBytes(control + capacity * slot_size);
}

size_t SwissTableCapacityAfterInsert(size_t size, size_t capacity) {
  if (capacity == 0) {
    return 1;
  }
  // abseil grows a table once its growth budget (7/8 of the capacity, less tombstones) is
  // spent, unless it is larger than a group and at most 25/32 full: then it only drops the
  // tombstones in place. So up to 25/32 full, the capacity cannot change.
  if (capacity > kSwissGroupWidth &&
      static_cast<uint64_t>(size) * 32 <= static_cast<uint64_t>(capacity) * 25) {
    return capacity;
  }
  return 2 * capacity + 1;
}

}  // namespace sluice
