#include "server/common/heap_trim.h"

#include <malloc.h>

namespace sluice {

bool TrimHeapIfFree(size_t min_free_bytes) {
  const struct mallinfo2 info = mallinfo2();
  if (info.fordblks < min_free_bytes) {
    return false;
  }
  malloc_trim(0);
  return true;
}

}  // namespace sluice
