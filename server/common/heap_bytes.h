// What objects cost on the heap, for the stores that bound their memory in bytes (the memory
// backend, the failure_mode local store, the over-limit cache).
//
// The figures follow glibc's malloc and the abseil Swiss table layout on 64-bit Linux, which is
// what Sluice ships on (Debian 12); tests/server/common/heap_bytes_test.cc holds them to what
// glibc reports (mallinfo2). Elsewhere they remain estimates of the same order. Pure functions;
// thread-safe.
#pragma once

#include <cstddef>
#include <string>

namespace sluice {

// Bytes that one malloc(n) takes from the heap: glibc adds an 8-byte header and rounds up to
// 16, at least 32; a block at or above the mmap threshold (128 KiB by default) is mapped on its
// own and takes whole pages. 0 for n == 0 (nothing is allocated).
size_t HeapBlockBytes(size_t n);

// Heap bytes of `new T[n]` for a T with a destructor: one block of the elements and, before
// them, their count.
template <typename T>
size_t ArrayHeapBytes(size_t n) {
  return HeapBlockBytes(n * sizeof(T) + sizeof(size_t));
}

// Heap bytes of a string's character buffer: 0 while the string is held inline (the short
// string optimisation), else one block of capacity() + 1.
size_t StringHeapBytes(const std::string& s);

// Heap bytes of the backing array of an abseil Swiss table (flat_hash_map, node_hash_map, ...)
// with `capacity` slots of `slot_size` bytes aligned to `slot_align`: one control byte per slot
// plus a group's worth of cloned ones, then the slots. 0 for capacity 0 (an empty table shares a
// static array).
size_t SwissTableBytes(size_t capacity, size_t slot_size, size_t slot_align);

// The largest capacity that a Swiss table of `size` elements and `capacity` slots can have after
// inserting one more element: the same when it certainly has room, else what a growth gives
// (2 * capacity + 1). A table full of tombstones may instead rehash in place; counting it as a
// growth over-estimates, never under-estimates.
size_t SwissTableCapacityAfterInsert(size_t size, size_t capacity);

}  // namespace sluice
