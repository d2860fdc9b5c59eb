#include "server/common/heap_bytes.h"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "gtest/gtest.h"
#include "tests/support/heap_in_use.h"

namespace sluice {
namespace {

class HeapBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HeapInUse().has_value()) {
      GTEST_SKIP() << "malloc is not glibc's (sanitizer build): nothing to compare with";
    }
  }
};

// glibc's per-thread cache keeps up to 7 freed blocks of each small size, and mallinfo2 counts
// them as in use: taking one back does not move the figure, and taking one from the free lists
// may move up to 7 more into the cache. Holding this many blocks of a size first empties the
// cache; the figures may still be off by this many blocks.
constexpr size_t kCachedBlocksPerSize = 8;

// The heap a large block takes: in the heap, or mapped on its own, as glibc decides at the time
// (its mmap threshold rises as mapped blocks are freed). HeapBlockBytes counts the larger.
void ExpectLargeBlock(int64_t used, size_t count, size_t n) {
  const size_t in_heap = (n + 8 + 15) / 16 * 16;
  EXPECT_GE(used, static_cast<int64_t>(count * in_heap)) << "n = " << n;
  EXPECT_LE(used, static_cast<int64_t>(count * HeapBlockBytes(n))) << "n = " << n;
}

// Verifies HeapBlockBytes is what glibc takes for blocks of many sizes, small and mapped.
TEST_F(HeapBytesTest, BlockBytesMatchGlibc) {
  for (size_t n : {size_t{1}, size_t{8}, size_t{24}, size_t{25}, size_t{40}, size_t{100},
                   size_t{512}, size_t{1025}, size_t{4000}, size_t{70000},
                   size_t{200000}, size_t{1} << 20}) {
    const size_t count = n < 100000 ? 200 : 8;
    std::vector<void*> warm(kCachedBlocksPerSize);
    for (void*& block : warm) {
      block = std::malloc(n);
    }
    std::vector<void*> blocks(count);
    const int64_t before = *HeapInUse();
    for (void*& block : blocks) {
      block = std::malloc(n);
    }
    const int64_t used = *HeapInUse() - before;
    for (void* block : blocks) {
      std::free(block);
    }
    for (void* block : warm) {
      std::free(block);
    }
    if (n >= 100000) {
      ExpectLargeBlock(used, count, n);
    } else {
      EXPECT_NEAR(used, static_cast<double>(count * HeapBlockBytes(n)),
                  static_cast<double>(kCachedBlocksPerSize * HeapBlockBytes(n)))
          << "n = " << n;
    }
  }
  EXPECT_EQ(HeapBlockBytes(0), 0u);
}

// Verifies a string costs nothing while inline and one block of its capacity beyond that.
TEST_F(HeapBytesTest, StringBytesMatchGlibc) {
  EXPECT_EQ(StringHeapBytes(std::string("short")), 0u);
  std::vector<std::string> strings;
  strings.reserve(100);
  const int64_t before = *HeapInUse();
  size_t counted = 0;
  // Past the per-thread cache's largest size (about 1 KiB), so every block is a fresh one.
  for (size_t i = 0; i < 100; ++i) {
    strings.emplace_back(1100 + i * 20, 'x');
    counted += StringHeapBytes(strings.back());
  }
  EXPECT_EQ(*HeapInUse() - before, static_cast<int64_t>(counted));
}

// Verifies SwissTableBytes is the backing array that abseil allocates, for flat and node maps.
TEST_F(HeapBytesTest, SwissTableBytesMatchAbseil) {
  // Tables whose arrays are past the per-thread cache's largest size (about 1 KiB).
  for (size_t n : {size_t{100}, size_t{1000}, size_t{5000}}) {
    const int64_t before = *HeapInUse();
    absl::flat_hash_map<std::string, int64_t> flat;
    flat.reserve(n);
    using FlatSlot = absl::flat_hash_map<std::string, int64_t>::value_type;
    const int64_t used = *HeapInUse() - before;
    const size_t counted = SwissTableBytes(flat.capacity(), sizeof(FlatSlot), alignof(FlatSlot));
    if (counted < (size_t{128} << 10)) {
      EXPECT_EQ(used, static_cast<int64_t>(counted)) << "n = " << n;
    } else {
      // In the heap or mapped (see ExpectLargeBlock): at most a page apart.
      EXPECT_LE(used, static_cast<int64_t>(counted)) << "n = " << n;
      EXPECT_GT(used + 4096 + 16, static_cast<int64_t>(counted)) << "n = " << n;
    }
  }
  absl::node_hash_map<std::string, int64_t> node;
  const int64_t before = *HeapInUse();
  node.reserve(3000);
  EXPECT_EQ(*HeapInUse() - before,
            static_cast<int64_t>(SwissTableBytes(node.capacity(), sizeof(void*), alignof(void*))));
  EXPECT_EQ(SwissTableBytes(0, 48, 8), 0u);
}

// Verifies ArrayHeapBytes is what new T[n] takes for a T with a destructor.
TEST_F(HeapBytesTest, ArrayBytesMatchGlibc) {
  struct WithDestructor {
    ~WithDestructor() { text.clear(); }
    std::string text;
    int64_t more[3] = {};
  };
  const int64_t before = *HeapInUse();
  auto* array = new WithDestructor[64];
  const int64_t used = *HeapInUse() - before;
  delete[] array;
  EXPECT_EQ(used, static_cast<int64_t>(ArrayHeapBytes<WithDestructor>(64)));
}

// Verifies the projected capacity after an insertion is never below the real one, through
// growth and through churn that leaves tombstones, and equals it while the table has room.
TEST(SwissTableCapacityTest, AfterInsertNeverUnderEstimates) {
  absl::flat_hash_map<uint64_t, uint64_t> table;
  std::mt19937_64 random(7);
  std::vector<uint64_t> keys;
  size_t exact = 0;
  for (int step = 0; step < 200000; ++step) {
    // Grow to about 3000 keys, then churn: insert one, erase one at random.
    if (keys.size() >= 3000 || (keys.size() > 100 && random() % 3 == 0)) {
      const size_t victim = random() % keys.size();
      table.erase(keys[victim]);
      keys[victim] = keys.back();
      keys.pop_back();
      continue;
    }
    const size_t projected = SwissTableCapacityAfterInsert(table.size(), table.capacity());
    const size_t before = table.capacity();
    const uint64_t key = random();
    table.emplace(key, 0);
    keys.push_back(key);
    ASSERT_LE(table.capacity(), projected) << "step " << step;
    exact += projected == before ? 1 : 0;
  }
  // Most insertions happen with room to spare, and are projected exactly.
  EXPECT_GT(exact, 100000u);
}

}  // namespace
}  // namespace sluice
