#include "server/key/storage_key.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/redis/cluster/hash_slot.h"

namespace sluice {
namespace {

std::string Key(std::vector<std::pair<std::string, std::string>> entries) {
  std::vector<DescriptorEntryView> views;
  for (const auto& [k, v] : entries) {
    views.push_back({k, v});
  }
  return StorageKey("sl:", "dom", views, "fw:60");
}

// Verifies the documented layout: prefix, hash tag over the descriptor, rule suffix.
TEST(StorageKeyTest, LayoutIsPrefixTagSuffix) {
  EXPECT_EQ(Key({{"user", "alice"}, {"path", "/a"}}), "sl:{dom|user=alice|path=/a}fw:60");
}

// Verifies hostile values cannot collide with other descriptors or break the hash tag.
TEST(StorageKeyTest, HostileValuesNeverCollide) {
  std::vector<std::vector<std::pair<std::string, std::string>>> inputs = {
      {{"a_b", "c"}}, {{"a", "b_c"}}, {{"a", "b|c=d"}}, {{"a", "b"}, {"c", "d"}},
      {{"a=b", "c"}}, {{"a", "b=c"}}, {{"a", "}"}},     {{"a", "{"}},
      {{"a", "%7D"}}, {{"a", "\n"}},  {{"a", "%0A"}},   {{"a", ""}},
      {{"a", " "}},   {{"a", "|"}},   {{"a", "%"}},     {{"a", std::string(4096, 'x')}},
      {{"a", std::string(4096, 'x') + "}"}},
  };
  std::set<std::string> keys;
  for (const auto& in : inputs) {
    std::string key = Key(in);
    EXPECT_TRUE(keys.insert(key).second) << "collision: " << key;
    // The hash tag is the text between the first '{' and the first '}' after it: it must be
    // exactly our braces, so a value can never shorten or move the tag.
    size_t open = key.find('{');
    size_t close = key.find('}', open);
    EXPECT_EQ(open, 3u);
    EXPECT_EQ(close, key.size() - 6) << key;
    EXPECT_EQ(key.find('\n'), std::string::npos);
  }
}

// Verifies a hash_tag rule tags by that one entry, keeps the whole descriptor in the key, and
// falls back to the default layout when the request lacks the entry.
TEST(StorageKeyTest, HashTagByOneEntry) {
  std::vector<DescriptorEntryView> a = {{"user", "42"}, {"path", "/a"}};
  std::vector<DescriptorEntryView> b = {{"user", "42"}, {"plan", "gold"}};
  std::string ka = StorageKey("sl:", "dom", a, "tb:60", "user");
  std::string kb = StorageKey("sl:", "dom", b, "tb:60", "user");
  EXPECT_EQ(ka, "sl:{dom|user=42}|user=42|path=/a|tb:60");
  EXPECT_EQ(HashSlot(ka), HashSlot(kb));  // one slot on a Redis Cluster
  EXPECT_NE(ka, kb);
  std::vector<DescriptorEntryView> no_user = {{"path", "/a"}};
  EXPECT_EQ(StorageKey("sl:", "dom", no_user, "tb:60", "user"),
            StorageKey("sl:", "dom", no_user, "tb:60"));
  // A tagged key never equals a default one.
  std::vector<DescriptorEntryView> just_user = {{"user", "42"}};
  EXPECT_NE(StorageKey("sl:", "dom", just_user, "tb:60", "user"),
            StorageKey("sl:", "dom", just_user, "tb:60"));
}

// Verifies a share_threshold pattern is written apart from any literal value, even the
// literal text of the pattern itself.
TEST(StorageKeyTest, SharedPatternNeverMeetsALiteral) {
  std::vector<DescriptorEntryView> shared = {{"files", "docs/*", /*shared_pattern=*/true}};
  std::vector<DescriptorEntryView> literal = {{"files", "docs/*"}};
  std::vector<DescriptorEntryView> forged = {{"files", "=docs/*"}};
  EXPECT_EQ(StorageKey("sl:", "dom", shared, "fw:60"), "sl:{dom|files==docs/*}fw:60");
  EXPECT_EQ(StorageKey("sl:", "dom", literal, "fw:60"), "sl:{dom|files=docs/*}fw:60");
  EXPECT_EQ(StorageKey("sl:", "dom", forged, "fw:60"), "sl:{dom|files=%3Ddocs/*}fw:60");
}

// Verifies a window key names the window that holds the time, by floor division.
TEST(StorageKeyTest, FixedWindowKeyNamesTheWindow) {
  const LimitParams three{Algorithm::kFixedWindow, 1, 3'000'000, 1};
  std::string a, b, c, before;
  AppendFixedWindowKey("k", three, 5'999'999, &a);
  AppendFixedWindowKey("k", three, 3'000'000, &b);
  AppendFixedWindowKey("k", three, 6'000'000, &c);
  AppendFixedWindowKey("k", three, -1, &before);
  EXPECT_EQ(a, "k:w1");
  EXPECT_EQ(a, b);
  EXPECT_EQ(c, "k:w2");
  EXPECT_EQ(before, "k:w-1");  // floor, not truncation
}

// Verifies a calendar month's window key counts months, never meeting a 30-day window's key:
// 2026-02-28 23:59:59 and 2026-02-01 00:00:00 UTC share February's key, March 1st does not.
TEST(StorageKeyTest, CalendarMonthKeyNamesTheMonth) {
  LimitParams month{Algorithm::kFixedWindow, 1, kMonthUs, 1};
  month.calendar_months = true;
  std::string end_of_february, start_of_february, march, thirty_days;
  AppendFixedWindowKey("k", month, int64_t{1772323199} * 1'000'000, &end_of_february);
  AppendFixedWindowKey("k", month, int64_t{1769904000} * 1'000'000, &start_of_february);
  AppendFixedWindowKey("k", month, int64_t{1772323200} * 1'000'000, &march);
  month.calendar_months = false;
  AppendFixedWindowKey("k", month, int64_t{1769904000} * 1'000'000, &thirty_days);
  EXPECT_EQ(end_of_february, "k:m673");  // (2026 - 1970) * 12 + 1
  EXPECT_EQ(start_of_february, end_of_february);
  EXPECT_EQ(march, "k:m674");
  EXPECT_EQ(thirty_days, "k:w682");
}


// Verifies the rule suffix names the algorithm and the period in seconds; it names stored
// state, so it must never change.
TEST(StorageKeyTest, RuleSuffixNamesAlgorithmAndPeriod) {
  EXPECT_EQ(RuleKeySuffix(Algorithm::kFixedWindow, 1), "fw:1");
  EXPECT_EQ(RuleKeySuffix(Algorithm::kSlidingWindowLog, 60), "swl:60");
  EXPECT_EQ(RuleKeySuffix(Algorithm::kSlidingWindowCounter, 300), "swc:300");
  EXPECT_EQ(RuleKeySuffix(Algorithm::kTokenBucket, 1), "tb:1");
  EXPECT_EQ(RuleKeySuffix(Algorithm::kLeakyBucket, 604800), "lb:604800");
  EXPECT_EQ(RuleKeySuffix(Algorithm::kGcra, 3600), "gcra:3600");
}

}  // namespace
}  // namespace sluice
