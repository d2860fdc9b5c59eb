#include "server/service/unbacked_acquisitions.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"
#include "tests/support/heap_in_use.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMiB = size_t{1} << 20;
constexpr int64_t kLeaseUs = 60'000'000;

// A storage key as the service builds one for a descriptor value of `value_bytes`.
std::string BigKey(int i, size_t value_bytes) {
  std::string key = absl::StrCat("ratelimit_{edge|user_inflight=", i, "-");
  key.resize(key.size() + value_bytes, 'v');
  return key + "}cc:300";
}

class UnbackedAcquisitionsTest : public ::testing::Test {
 protected:
  FakeClock clock_{1'700'000'000'000'000};
  UnbackedAcquisitions store_{clock_, 64};
};

// Verifies recorded acquisitions are taken by releases, one per hit, up to what was recorded: a
// release of more takes what there is, and one of a key never recorded takes nothing.
TEST_F(UnbackedAcquisitionsTest, ReleasesTakeWhatWasRecorded) {
  EXPECT_TRUE(store_.Empty());
  store_.Record("k", 2, /*held_locally=*/false, kLeaseUs);
  EXPECT_FALSE(store_.Empty());
  EXPECT_EQ(store_.Take("other", 1).total(), 0u);
  UnbackedAcquisitions::Taken first = store_.Take("k", 1);
  EXPECT_EQ(first.unheld, 1u);
  EXPECT_EQ(first.local, 0u);
  EXPECT_EQ(store_.Take("k", 5).total(), 1u);  // only one left
  EXPECT_EQ(store_.Take("k", 1).total(), 0u);
  EXPECT_TRUE(store_.Empty());  // a key with none left is dropped
  EXPECT_EQ(store_.recorded(), 2u);
  EXPECT_EQ(store_.released(), 2u);
}

// Verifies the leases the local store holds are counted apart and taken first.
TEST_F(UnbackedAcquisitionsTest, LocallyHeldAreCountedApartAndTakenFirst) {
  store_.Record("k", 1, /*held_locally=*/false, kLeaseUs);
  store_.Record("k", 2, /*held_locally=*/true, kLeaseUs);
  UnbackedAcquisitions::Taken taken = store_.Take("k", 2);
  EXPECT_EQ(taken.local, 2u);
  EXPECT_EQ(taken.unheld, 0u);
  taken = store_.Take("k", 2);
  EXPECT_EQ(taken.local, 0u);
  EXPECT_EQ(taken.unheld, 1u);
}

// Verifies a key's acquisitions are forgotten one lease unit after the latest of them (its lease
// would have lapsed in the backend too), each new acquisition pushing that back, and that a key
// recorded again after lapsing starts from its new acquisitions alone.
TEST_F(UnbackedAcquisitionsTest, LapseOneUnitAfterTheLatestAcquisition) {
  store_.Record("k", 1, false, kLeaseUs);
  clock_.AdvanceMicros(kLeaseUs / 2);
  store_.Record("k", 1, false, kLeaseUs);
  clock_.AdvanceMicros(kLeaseUs / 2);  // the first one's unit is over, not the second's
  EXPECT_EQ(store_.Take("k", 1).total(), 1u);
  clock_.AdvanceMicros(kLeaseUs / 2 - 1);
  EXPECT_EQ(store_.Take("k", 1).total(), 1u);
  store_.Record("j", 3, false, kLeaseUs);
  clock_.AdvanceMicros(kLeaseUs);
  EXPECT_EQ(store_.Take("j", 1).total(), 0u);
  EXPECT_TRUE(store_.Empty());
  store_.Record("j", 3, false, kLeaseUs);
  clock_.AdvanceMicros(kLeaseUs);
  store_.Record("j", 1, false, kLeaseUs);  // the three lapsed: one held
  EXPECT_EQ(store_.Take("j", 5).total(), 1u);
}

// Verifies expired entries are dropped as the shards are used, so the store empties after an
// outage without a release for each key, and Empty() lets releases skip it again.
TEST_F(UnbackedAcquisitionsTest, EmptiesOnceEverythingLapsed) {
  UnbackedAcquisitions store(clock_, 10000);
  for (int i = 0; i < 50; ++i) {
    store.Record(absl::StrCat("key", i), 1, false, 1000);
  }
  EXPECT_FALSE(store.Empty());
  clock_.AdvanceMicros(UnbackedAcquisitions::kSweepIntervalUs);
  // Releases of other keys reach every shard, which sweeps itself.
  for (int i = 0; i < 2000 && !store.Empty(); ++i) {
    store.Take(absl::StrCat("other", i), 1);
  }
  EXPECT_TRUE(store.Empty());
  EXPECT_EQ(store.TotalUsage().keys, 0u);
  EXPECT_EQ(store.TotalUsage().evictions, 0u);
}

// Verifies the store never holds more keys than its bound, and evicts (counted) to make room.
TEST_F(UnbackedAcquisitionsTest, IsBoundedInKeys) {
  for (int i = 0; i < 10000; ++i) {
    store_.Record(absl::StrCat("key", i), 1, false, kLeaseUs);
  }
  const UnbackedAcquisitions::Usage usage = store_.TotalUsage();
  EXPECT_LE(usage.keys, 64u);
  EXPECT_EQ(usage.evictions, 10000u - usage.keys);
  EXPECT_EQ(store_.Take("key9999", 1).total(), 1u);  // the newest are kept
}

// Verifies many keys with 1 KiB values never take more than max_bytes, expired entries make room
// before live ones are evicted, and a key too large for a shard's share is not recorded.
TEST_F(UnbackedAcquisitionsTest, IsBoundedInBytes) {
  UnbackedAcquisitions store(clock_, 1000000, kMiB);
  for (int i = 0; i < 5000; ++i) {
    store.Record(BigKey(i, 1024), 1, false, 1000);
    if (i % 500 == 499) {
      ASSERT_LE(store.TotalUsage().bytes, kMiB) << "after " << i + 1 << " keys";
    }
  }
  const uint64_t evicted = store.TotalUsage().evictions;
  EXPECT_GT(evicted, 0u);
  clock_.AdvanceMicros(1000);
  for (int i = 0; i < 100; ++i) {
    store.Record(BigKey(100000 + i, 1024), 1, false, 1000);
  }
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(store.Take(BigKey(100000 + i, 1024), 1).total(), 1u) << i;
  }
  EXPECT_EQ(store.TotalUsage().evictions, evicted);
  const std::string huge(64 * 1024, 'k');  // a shard's share of 1 MiB is 32 KiB
  store.Record(huge, 1, false, 1000);
  EXPECT_EQ(store.Take(huge, 1).total(), 0u);
  EXPECT_LE(store.TotalUsage().bytes, kMiB);
}

// Verifies the account against what glibc reports.
TEST_F(UnbackedAcquisitionsTest, BytesUsedMatchesTheAllocator) {
  if (!HeapInUse().has_value()) {
    GTEST_SKIP() << "malloc is not glibc's (sanitizer build): nothing to compare with";
  }
  const int64_t before = *HeapInUse();
  auto store = std::make_unique<UnbackedAcquisitions>(clock_, 1000000, 64 * kMiB);
  for (int i = 0; i < 20000; ++i) {
    store->Record(BigKey(i, i % 5 == 0 ? 3 : 50 + i % 1500), 1, i % 2 == 0, kLeaseUs);
  }
  const double real = static_cast<double>(*HeapInUse() - before);
  const double counted = static_cast<double>(store->TotalUsage().bytes);
  EXPECT_NEAR(counted, real, std::max(real * 0.05, 4096.0));
  EXPECT_GE(counted, real - std::max(real * 0.01, 4096.0));
}

// Verifies concurrent records and releases of shared keys lose and invent nothing: every
// acquisition recorded is taken exactly once.
TEST_F(UnbackedAcquisitionsTest, ConcurrentRecordsAndReleasesBalance) {
  UnbackedAcquisitions store(clock_, 1000000, 64 * kMiB);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<uint64_t> taken(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = absl::StrCat("k", i % 16);
        store.Record(key, 1, i % 3 == 0, kLeaseUs);
        taken[t] += store.Take(key, 1).total();
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  uint64_t total = 0;
  for (uint64_t n : taken) {
    total += n;
  }
  for (int k = 0; k < 16; ++k) {
    total += store.Take(absl::StrCat("k", k), kThreads * kPerThread).total();
  }
  EXPECT_EQ(total, uint64_t{kThreads} * kPerThread);
  EXPECT_TRUE(store.Empty());
}

// Verifies /metrics gets the keys, bytes, bound, evictions, and the acquisitions recorded and
// released.
TEST_F(UnbackedAcquisitionsTest, AppendsItsMetrics) {
  UnbackedAcquisitions store(clock_, 64, 2 * kMiB);
  for (int i = 0; i < 100; ++i) {
    store.Record(absl::StrCat("k", i), 2, false, kLeaseUs);
  }
  store.Take("k99", 1);
  std::string text;
  store.AppendMetrics(&text);
  const UnbackedAcquisitions::Usage usage = store.TotalUsage();
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("sluice_unbacked_acquisitions_keys ", usage.keys, "\n")));
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("sluice_unbacked_acquisitions_bytes ", usage.bytes, "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("sluice_unbacked_acquisitions_max_bytes ", 2 * kMiB,
                                           "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("sluice_unbacked_acquisitions_evictions_total ",
                                           usage.evictions, "\n")));
  EXPECT_THAT(text, HasSubstr("sluice_unbacked_acquisitions_recorded_total 200\n"));
  EXPECT_THAT(text, HasSubstr("sluice_unbacked_acquisitions_released_total 1\n"));
  EXPECT_GE(usage.evictions, 100u - 64u);
}

}  // namespace
}  // namespace sluice
