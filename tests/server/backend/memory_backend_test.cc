#include "server/backend/memory_backend.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

LimitParams Params(Algorithm algorithm, uint64_t limit, int64_t period_us, uint64_t burst = 0) {
  return LimitParams{algorithm, limit, period_us, burst ? burst : limit};
}

class MemoryBackendTest : public ::testing::Test {
 protected:
  std::vector<Decision> Run(std::vector<LimitCheck> checks) {
    std::vector<Decision> out;
    backend_.Evaluate(checks, [&](absl::Status status, absl::Span<const Decision> decisions) {
      EXPECT_TRUE(status.ok());
      out.assign(decisions.begin(), decisions.end());
    });
    EXPECT_EQ(out.size(), checks.size());
    return out;
  }
  Decision One(absl::string_view key, LimitParams params, uint64_t hits = 1) {
    return Run({LimitCheck{key, params, hits, 0}})[0];
  }

  FakeClock clock_{1700006400000000};
  MemoryBackend backend_{clock_, MemoryBackendOptions{4, 1000, 1000000}};
};

// Verifies every algorithm runs through the backend and keys are independent.
TEST_F(MemoryBackendTest, RunsEveryAlgorithmPerKey) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                      Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                      Algorithm::kLeakyBucket, Algorithm::kGcra}) {
    std::string key = absl::StrCat("k", static_cast<int>(a));
    LimitParams p = Params(a, 2, 60'000'000);
    EXPECT_TRUE(One(key, p).allowed) << static_cast<int>(a);
    EXPECT_TRUE(One(key, p).allowed) << static_cast<int>(a);
    EXPECT_FALSE(One(key, p).allowed) << static_cast<int>(a);
    EXPECT_TRUE(One(key + "-other", p).allowed) << static_cast<int>(a);
  }
}

// Verifies a group is all-or-nothing: when one check denies, the others consume nothing.
TEST_F(MemoryBackendTest, GroupDeniedConsumesNothing) {
  LimitParams wide = Params(Algorithm::kFixedWindow, 10, 60'000'000);
  LimitParams narrow = Params(Algorithm::kFixedWindow, 1, 60'000'000);
  auto first = Run({{"wide", wide, 1, 7}, {"narrow", narrow, 1, 7}});
  EXPECT_TRUE(first[0].allowed && first[1].allowed);
  auto second = Run({{"wide", wide, 1, 7}, {"narrow", narrow, 1, 7}});
  EXPECT_FALSE(second[1].allowed);
  // "wide" still has 9 left: the denied group did not consume from it.
  EXPECT_EQ(One("wide", wide, 0).remaining, 9u);
}

// Verifies idle keys expire once their state is back to fresh, bounding memory.
TEST_F(MemoryBackendTest, IdleKeysExpire) {
  LimitParams p = Params(Algorithm::kTokenBucket, 10, 1'000'000);
  for (int i = 0; i < 100; ++i) {
    One(absl::StrCat("user", i), p);
  }
  EXPECT_EQ(backend_.KeyCount(), 100u);
  clock_.AdvanceMicros(2'000'000);
  // A new key sweeps its shard when due; 64 new keys reach all 4 shards (a shard is missed
  // with probability 4 * (3/4)^64, about 4e-8).
  for (int i = 0; i < 64; ++i) {
    One(absl::StrCat("spread", i), p);
  }
  EXPECT_EQ(backend_.KeyCount(), 64u);
}

// Verifies a full backend evicts rather than grows past its bound.
TEST_F(MemoryBackendTest, NeverHoldsMoreThanMaxKeys) {
  LimitParams p = Params(Algorithm::kFixedWindow, 10, 3'600'000'000);
  for (int i = 0; i < 5000; ++i) {
    One(absl::StrCat("user", i), p);
  }
  EXPECT_LE(backend_.KeyCount(), 1000u);
  EXPECT_GE(backend_.EvictionCount(), 4000u);
}

// Verifies a rule whose algorithm changed starts from a fresh state instead of misreading it.
TEST_F(MemoryBackendTest, AlgorithmChangeResetsState) {
  One("k", Params(Algorithm::kFixedWindow, 1, 60'000'000));
  EXPECT_FALSE(One("k", Params(Algorithm::kFixedWindow, 1, 60'000'000)).allowed);
  EXPECT_TRUE(One("k", Params(Algorithm::kTokenBucket, 1, 60'000'000)).allowed);
}

// Verifies concurrent callers never over-admit one key.
TEST_F(MemoryBackendTest, ConcurrentCallersShareOneLimit) {
  LimitParams p = Params(Algorithm::kFixedWindow, 1000, 3'600'000'000);
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        LimitCheck check{"shared", p, 1, 0};
        backend_.Evaluate({&check, 1}, [&](absl::Status, absl::Span<const Decision> d) {
          if (d[0].allowed) {
            admitted.fetch_add(1);
          }
        });
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(admitted.load(), 1000);
}

}  // namespace
}  // namespace sluice
