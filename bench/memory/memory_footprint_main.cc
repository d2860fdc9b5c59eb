// What the in-process stores cost per key: fills a MemoryBackend and an OverLimitCache with
// keys built as Sluice builds storage keys (one descriptor entry whose value is --value_bytes
// long) and prints, per key, the heap actually in use (glibc mallinfo2) and what the store
// counts against its byte bound (BytesUsed). Both bounds are set out of the way.
//
//   build/bin/sluice-memory-footprint --keys=20000 --value_bytes=1024
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "server/backend/memory_backend.h"
#include "server/common/clock.h"
#include "server/key/storage_key.h"
#include "server/service/over_limit_cache.h"

ABSL_FLAG(int64_t, keys, 20000, "keys to store");
ABSL_FLAG(int64_t, value_bytes, 1024, "length of the descriptor value in each key");
ABSL_FLAG(int64_t, log_hits, 100, "sliding_window_log: admissions per key");

namespace sluice {
namespace {

// Heap in use: small blocks from the arenas and large ones mapped on their own.
int64_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// Moves one microsecond per Step, so that successive admissions are apart in a log.
class StepClock final : public Clock {
 public:
  int64_t NowMicros() const override { return now_us_; }
  int64_t MonotonicMicros() const override { return now_us_; }
  void Step() { ++now_us_; }

 private:
  int64_t now_us_ = 1700006400000000;
};

std::vector<std::string> Keys(size_t n, size_t value_bytes, absl::string_view suffix) {
  std::vector<std::string> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string value = absl::StrCat(i, "-");
    value.resize(value_bytes, 'v');
    const DescriptorEntryView entry{"user_id", value};
    keys.push_back(StorageKey("ratelimit_", "edge_proxy", {&entry, 1}, suffix));
  }
  return keys;
}

void Row(const char* what, size_t n, int64_t heap_bytes, int64_t accounted_bytes,
         size_t key_bytes) {
  std::printf("%-40s %9zu %9zu %14.1f %14.1f\n", what, n, key_bytes,
              static_cast<double>(heap_bytes) / static_cast<double>(n),
              static_cast<double>(accounted_bytes) / static_cast<double>(n));
}

void MeasureBackend(const char* what, Algorithm algorithm, uint64_t limit, int64_t hits_per_key,
                    const std::vector<std::string>& keys) {
  StepClock clock;
  const int64_t before = HeapInUse();
  auto backend = std::make_unique<MemoryBackend>(
      clock, MemoryBackendOptions{.max_keys = keys.size() * 2, .max_bytes = size_t{1} << 40});
  const LimitParams params{algorithm, limit, 3'600'000'000, limit};
  std::vector<Decision> decisions(1);
  for (const std::string& key : keys) {
    for (int64_t h = 0; h < hits_per_key; ++h) {
      const LimitCheck check{key, params, 1, 0};
      backend->EvaluateInto({&check, 1}, absl::MakeSpan(decisions));
      clock.Step();
    }
  }
  decisions = {};
  const int64_t heap = HeapInUse() - before;
  Row(what, backend->KeyCount(), heap, static_cast<int64_t>(backend->BytesUsed()),
      keys.front().size());
}

void MeasureCache(const std::vector<std::string>& keys) {
  StepClock clock;
  const int64_t before = HeapInUse();
  auto cache = std::make_unique<OverLimitCache>(clock, keys.size() * 2, size_t{1} << 40);
  for (const std::string& key : keys) {
    cache->Remember(key, 1, 1'000'000);
  }
  const int64_t heap = HeapInUse() - before;
  Row("over-limit cache", cache->size(), heap, static_cast<int64_t>(cache->BytesUsed()),
      keys.front().size());
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using sluice::Algorithm;
  const size_t n = static_cast<size_t>(absl::GetFlag(FLAGS_keys));
  const size_t value_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_value_bytes));
  const int64_t log_hits = absl::GetFlag(FLAGS_log_hits);
  std::printf("%-40s %9s %9s %14s %14s\n", "store", "keys", "key bytes", "heap B/key",
              "counted B/key");
  const auto keys = sluice::Keys(n, value_bytes, "fw:3600");
  sluice::MeasureBackend("memory backend, fixed_window", Algorithm::kFixedWindow, 1000, 1, keys);
  sluice::MeasureBackend("memory backend, token_bucket", Algorithm::kTokenBucket, 1000, 1, keys);
  sluice::MeasureBackend("memory backend, sliding_window_log 1", Algorithm::kSlidingWindowLog,
                         1000, 1, keys);
  const std::string log_row = absl::StrCat("memory backend, sliding_window_log ", log_hits);
  sluice::MeasureBackend(log_row.c_str(), Algorithm::kSlidingWindowLog, 1000000, log_hits,
                         keys);
  sluice::MeasureCache(keys);
  return 0;
}
