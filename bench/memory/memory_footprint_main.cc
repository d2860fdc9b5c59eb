// What the in-process stores cost per key: fills a MemoryBackend and an OverLimitCache with
// keys built as Sluice builds storage keys (one descriptor entry whose value is --value_bytes
// long) and prints, per key, the heap actually in use (glibc mallinfo2) and what the store
// counts against its byte bound (BytesUsed). Both bounds are set out of the way. Then the quota
// server (RLQS) holding --rlqs_streams streams of --rlqs_buckets buckets each: heap per (stream,
// bucket), and how long a rebalance holds its lock.
//
//   build/bin/sluice-memory-footprint --keys=20000 --value_bytes=1024
#include <malloc.h>

#include <chrono>
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
#include "server/config/config_loader.h"
#include "server/quota/quota_server.h"
#include "server/service/over_limit_cache.h"

ABSL_FLAG(int64_t, keys, 20000, "keys to store");
ABSL_FLAG(int64_t, value_bytes, 1024, "length of the descriptor value in each key");
ABSL_FLAG(int64_t, log_hits, 100, "sliding_window_log: admissions per key");
ABSL_FLAG(int64_t, rlqs_buckets, 10000, "quota server: buckets each stream reports");
ABSL_FLAG(int64_t, rlqs_streams, 50, "quota server: streams (Envoys)");

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
    cache->Remember(key, 1, 10, 1'000'000);
  }
  const int64_t heap = HeapInUse() - before;
  Row("over-limit cache", cache->size(), heap, static_cast<int64_t>(cache->BytesUsed()),
      keys.front().size());
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// The quota server holding `streams` streams that each report the same `buckets` buckets (two
// pairs each, a 100/s rule), after a rebalance: heap per (stream, bucket) and in all.
void MeasureQuota(size_t streams, size_t buckets) {
  auto config = LoadConfigText("bench.yaml", R"(domain: bench
descriptors:
  - key: route
    descriptors:
      - key: tenant
        rate_limit: {unit: second, requests_per_unit: 100}
)");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return;
  }
  ConfigStore store(std::shared_ptr<const Config>(std::move(*config)));
  const int64_t before = HeapInUse();
  {
    quota::QuotaOptions options;
    options.max_subscriptions = streams * buckets;
    options.max_buckets_per_stream = buckets;
    // One peer here; the byte budgets out of the way (what they count is printed).
    options.max_streams_per_peer = streams;
    options.max_bytes = options.max_peer_bytes = size_t{1} << 40;
    quota::QuotaServer server(store, options);
    int64_t now_us = 1'000'000'000;
    std::vector<quota::QuotaServer::StreamId> ids;
    for (size_t s = 0; s < streams; ++s) {
      auto id = server.Open([](quota::QuotaResponse) {});
      ids.push_back(*id);
      for (size_t first = 0; first < buckets; first += 1000) {
        quota::Reports reports;
        reports.set_domain("bench");
        for (size_t b = first; b < std::min(buckets, first + 1000); ++b) {
          auto* usage = reports.add_bucket_quota_usages();
          auto& pairs = *usage->mutable_bucket_id()->mutable_bucket();
          pairs["route"] = "api";
          pairs["tenant"] = absl::StrCat("tenant-", b);
          usage->mutable_time_elapsed()->set_seconds(1);
          usage->set_num_requests_allowed(10);
        }
        if (!server.Report(*id, reports, now_us).ok()) {
          std::fprintf(stderr, "report refused\n");
          return;
        }
      }
    }
    now_us += 1'000'000;
    const auto start = std::chrono::steady_clock::now();
    server.Tick(now_us);
    const double tick_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    // A steady rebalance: the shares moved at the first, so nothing is sent now.
    now_us += 1'000'000;
    const auto steady_start = std::chrono::steady_clock::now();
    server.Tick(now_us);
    const double steady_ms = std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - steady_start)
                                 .count();
    const int64_t heap = HeapInUse() - before;
    const quota::QuotaServer::Usage usage = server.TotalUsage();
    const size_t held = usage.subscriptions;
    std::printf("%-40s %9zu %9s %14.0f %14.0f   (%zu streams x %zu buckets: %.1f MiB, %.1f MiB "
                "counted; a rebalance sending every share %.0f ms, a steady one %.0f ms)\n",
                "quota server (RLQS)", held, "-", static_cast<double>(heap) / held,
                static_cast<double>(usage.bytes) / held, streams, buckets,
                static_cast<double>(heap) / (1 << 20), static_cast<double>(usage.bytes) / (1 << 20),
                tick_ms, steady_ms);
    for (quota::QuotaServer::StreamId id : ids) {
      server.Close(id);
    }
    server.Tick(now_us + 1'000'000);
    std::printf("%-40s   after every stream closed: %.1f MiB of heap in use, %zu bytes counted\n",
                "", static_cast<double>(HeapInUse() - before) / (1 << 20),
                server.TotalUsage().bytes);
  }
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
  sluice::MeasureQuota(static_cast<size_t>(absl::GetFlag(FLAGS_rlqs_streams)),
                       static_cast<size_t>(absl::GetFlag(FLAGS_rlqs_buckets)));
  return 0;
}
