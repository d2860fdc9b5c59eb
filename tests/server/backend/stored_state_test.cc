#include "server/backend/stored_state.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// struct.pack("<B" .. "d" x n): the code byte, then little-endian doubles.
std::string Pack(uint8_t code, std::vector<double> doubles) {
  std::string out(1, static_cast<char>(code));
  for (double d : doubles) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    for (int i = 0; i < 8; ++i) {
      out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
    }
  }
  return out;
}

std::string PackLogMember(double ts, double cum_after) { return Pack(0, {ts, cum_after}).substr(1); }

LimitParams Params(Algorithm algorithm) {
  LimitParams params;
  params.algorithm = algorithm;
  params.limit = 10;
  params.period_us = 60000000;
  params.burst = 20;
  return params;
}

// Verifies each string state the scripts write is read back into its C++ fields.
TEST(StoredStateTest, ReadsEachScriptsStringState) {
  const int64_t now = 1700000030000000;
  auto fixed = DecodeStringState(Params(Algorithm::kFixedWindow), "7", now);
  ASSERT_TRUE(fixed.has_value());
  EXPECT_EQ(std::get<FixedWindowState>(*fixed).count, 7u);
  EXPECT_EQ(std::get<FixedWindowState>(*fixed).window_start_us, 1700000000000000 - 20000000);
  auto counter =
      DecodeStringState(Params(Algorithm::kSlidingWindowCounter), Pack(2, {60e6, 3, 4}), now);
  ASSERT_TRUE(counter.has_value());
  const auto& c = std::get<SlidingWindowCounterState>(*counter);
  EXPECT_EQ(c.window_start_us, 60000000);
  EXPECT_EQ(c.current, 3u);
  EXPECT_EQ(c.previous, 4u);
  auto bucket = DecodeStringState(Params(Algorithm::kTokenBucket), Pack(3, {2.75, 1e15}), now);
  ASSERT_TRUE(bucket.has_value());
  EXPECT_TRUE(std::get<TokenBucketState>(*bucket).initialized);
  EXPECT_EQ(std::get<TokenBucketState>(*bucket).tokens, 2.75);
  EXPECT_EQ(std::get<TokenBucketState>(*bucket).last_us, 1000000000000000);
  auto leaky = DecodeStringState(Params(Algorithm::kLeakyBucket), Pack(4, {0.5, 7}), now);
  ASSERT_TRUE(leaky.has_value());
  EXPECT_EQ(std::get<LeakyBucketState>(*leaky).level, 0.5);
  EXPECT_EQ(std::get<LeakyBucketState>(*leaky).last_us, 7);
  auto gcra = DecodeStringState(Params(Algorithm::kGcra), Pack(5, {1234.5}), now);
  ASSERT_TRUE(gcra.has_value());
  EXPECT_EQ(std::get<GcraState>(*gcra).tat_us, 1234.5);
}

// Verifies a value the script would read as a fresh key is not taken for a state: another
// algorithm's code, a wrong length, text that is no number; and that a negative count is 0, as
// the scripts count it.
TEST(StoredStateTest, RefusesWhatTheScriptsWouldNotRead) {
  const int64_t now = 1700000030000000;
  EXPECT_FALSE(DecodeStringState(Params(Algorithm::kTokenBucket), Pack(4, {1, 2}), now));
  EXPECT_FALSE(DecodeStringState(Params(Algorithm::kTokenBucket), Pack(3, {1}), now));
  EXPECT_FALSE(DecodeStringState(Params(Algorithm::kGcra), "", now));
  EXPECT_FALSE(DecodeStringState(Params(Algorithm::kFixedWindow), "many", now));
  EXPECT_FALSE(DecodeStringState(Params(Algorithm::kSlidingWindowLog), "1", now));
  auto negative = DecodeStringState(Params(Algorithm::kFixedWindow), "-3", now);
  ASSERT_TRUE(negative.has_value());
  EXPECT_EQ(std::get<FixedWindowState>(*negative).count, 0u);
}

// Verifies a log's members and scores become its entries: each entry's hits are its cumulative
// count after, less its score, and the total is their sum.
TEST(StoredStateTest, ReadsTheLogsEntries) {
  std::vector<std::pair<std::string, std::string>> members = {
      {PackLogMember(100, 2), "0"}, {PackLogMember(200, 5), "2"}, {PackLogMember(200, 6), "5"}};
  auto log = DecodeLogState(members);
  ASSERT_TRUE(log.has_value());
  ASSERT_EQ(log->entries.size(), 3u);
  EXPECT_EQ(log->entries[0], std::make_pair(int64_t{100}, uint64_t{2}));
  EXPECT_EQ(log->entries[1], std::make_pair(int64_t{200}, uint64_t{3}));
  EXPECT_EQ(log->entries[2], std::make_pair(int64_t{200}, uint64_t{1}));
  EXPECT_EQ(log->total, 6u);
  EXPECT_FALSE(DecodeLogState({{"short", "0"}}));
  EXPECT_FALSE(DecodeLogState({{PackLogMember(1, 1), "x"}}));
  EXPECT_FALSE(DecodeLogState({{PackLogMember(1, 1), "5"}}));  // cum_after below its score
}

}  // namespace
}  // namespace sluice
