// Gives the heap's free pages back to the system when much is free. glibc keeps the pages of
// freed blocks in its arenas (one per thread that allocated), so a process that served a flood
// (parsed large messages, held state for clients that have gone) keeps that resident size after
// the memory is freed. Thread-safe; it takes the allocator's locks for as long as it runs, so
// call it at most every few seconds, off the request path.
#pragma once

#include <cstddef>

namespace sluice {

// When the heap holds at least `min_free_bytes` free (mallinfo2's fordblks, every arena),
// returns its free pages to the system (malloc_trim) and returns true.
bool TrimHeapIfFree(size_t min_free_bytes);

}  // namespace sluice
