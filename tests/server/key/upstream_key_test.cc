#include "server/key/upstream_key.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/key/storage_key.h"

namespace sluice {
namespace {

constexpr int64_t kSecond = 1'000'000;

LimitParams Window(int64_t period_s) {
  LimitParams params;
  params.algorithm = Algorithm::kFixedWindow;
  params.limit = 10;
  params.period_us = period_s * kSecond;
  return params;
}

std::string Upstream(const std::string& storage_key, absl::string_view prefix,
                     const LimitParams& params, int64_t now_s) {
  std::string out;
  EXPECT_TRUE(AppendUpstreamWindowKey(storage_key, prefix, params, now_s * kSecond, &out))
      << storage_key;
  return out;
}

class UpstreamKeyTest : public ::testing::Test {};

// Verifies the key of a one-rule descriptor is upstream's limiter/cache_key.go form: prefix,
// domain, each key and value followed by '_', and the window's start in seconds.
TEST_F(UpstreamKeyTest, IsUpstreamsCacheKey) {
  const std::vector<DescriptorEntryView> entries = {{"remote_address", "10.0.0.1"},
                                                    {"path", "/api"}};
  const std::string key = StorageKey("", "edge", entries, "fw:60");
  EXPECT_EQ(Upstream(key, "", Window(60), 1700000059), "edge_remote_address_10.0.0.1_path_/api_1700000040");
  const std::string prefixed = StorageKey("rl_", "edge", entries, "fw:3600");
  EXPECT_EQ(Upstream(prefixed, "rl_", Window(3600), 1700000059),
            "rl_edge_remote_address_10.0.0.1_path_/api_1699999200");
}

// Verifies escaped bytes come back as the request sent them (upstream writes them raw), and a
// share_threshold level writes its pattern, as upstream does.
TEST_F(UpstreamKeyTest, UnescapesAndWritesSharedPatterns) {
  const std::vector<DescriptorEntryView> entries = {{"k|{x}", "a b=c%"},
                                                    {"files", "docs/*", /*shared_pattern=*/true}};
  const std::string key = StorageKey("", "d", entries, "fw:1");
  EXPECT_EQ(Upstream(key, "", Window(1), 42), "d_k|{x}_a b=c%_files_docs/*_42");
}

// Verifies a rule with hash_tag (the tag then the whole descriptor) gives the same key.
TEST_F(UpstreamKeyTest, HashTagLayoutGivesTheSameKey) {
  const std::vector<DescriptorEntryView> entries = {{"user_id", "42"}, {"path", "/x"}};
  EXPECT_EQ(Upstream(StorageKey("", "d", entries, "fw:60", "user_id"), "", Window(60), 120),
            Upstream(StorageKey("", "d", entries, "fw:60"), "", Window(60), 120));
}

// Verifies windows upstream never keeps name their period: a multiplied unit, and a rule beside
// others on its descriptor (minute and hour would otherwise share the key on the hour).
TEST_F(UpstreamKeyTest, PeriodNamedWhereUpstreamHasNoSuchWindow) {
  const std::vector<DescriptorEntryView> entries = {{"k", "v"}};
  const std::string minute = StorageKey("", "d", entries, "fw:60");
  const std::string hour = StorageKey("", "d", entries, "fw:3600");
  EXPECT_EQ(Upstream(minute, "", Window(300), 600), "d_k_v_600_300s");
  LimitParams shared_minute = Window(60);
  shared_minute.shares_descriptor = true;
  LimitParams shared_hour = Window(3600);
  shared_hour.shares_descriptor = true;
  EXPECT_EQ(Upstream(minute, "", shared_minute, 3600), "d_k_v_3600_60s");
  EXPECT_EQ(Upstream(hour, "", shared_hour, 3600), "d_k_v_3600_3600s");
  EXPECT_TRUE(IsUpstreamUnitPeriod(31536000 * kSecond));
  EXPECT_FALSE(IsUpstreamUnitPeriod(120 * kSecond));
}

// Verifies a key of another prefix, or not in the storage format, is refused and appends
// nothing.
TEST_F(UpstreamKeyTest, RefusesForeignKeys) {
  std::string out = "x";
  EXPECT_FALSE(AppendUpstreamWindowKey("other:{d|k=v}fw:1", "sluice:", Window(1), 0, &out));
  EXPECT_FALSE(AppendUpstreamWindowKey("sluice:d|k=v", "sluice:", Window(1), 0, &out));
  EXPECT_FALSE(AppendUpstreamWindowKey("sluice:{d|k=%G1}fw:1", "sluice:", Window(1), 0, &out));
  EXPECT_EQ(out, "x");
}

// Verifies a request's limit override, whose storage key names its limit (erpc#1058), still
// makes upstream's key, which does not: overrides of different limits share upstream's counter,
// as they do on upstream.
TEST_F(UpstreamKeyTest, OverridesOfAnyLimitMakeUpstreamsKey) {
  const std::vector<DescriptorEntryView> entries = {{"user", "u"}};
  const std::string ten = StorageKey("", "d", entries, OverrideKeySuffix(60, 10));
  const std::string thousand = StorageKey("", "d", entries, OverrideKeySuffix(60, 1000));
  EXPECT_NE(ten, thousand);
  EXPECT_EQ(Upstream(ten, "", Window(60), 120), "d_user_u_120");
  EXPECT_EQ(Upstream(thousand, "", Window(60), 120), "d_user_u_120");
}

// Verifies a calendar month's key is stamped with 00:00 UTC on the 1st (upstream's
// USE_CALENDAR_MONTH_RATE_LIMIT), and its TTL is what is left of the month, where a 30-day
// month's TTL is the unit's 2,592,000 s (utils.UnitToDivider) whenever it is written.
TEST_F(UpstreamKeyTest, CalendarMonthKeyAndTtl) {
  const std::vector<DescriptorEntryView> entries = {{"k", "v"}};
  const std::string key = StorageKey("", "d", entries, "fw:2592000");
  LimitParams month = Window(2592000);
  month.calendar_months = true;
  // 2026-02-27 00:00:00 UTC: February started at 1769904000, March at 1772323200.
  const int64_t now_s = 1772150400;
  EXPECT_EQ(Upstream(key, "", month, now_s), "d_k_v_1769904000");
  EXPECT_EQ(UpstreamWindowTtlSeconds(month, now_s * kSecond), 2 * 86400);
  EXPECT_EQ(UpstreamWindowTtlSeconds(month, now_s * kSecond + 1), 2 * 86400);  // rounded up
  EXPECT_EQ(UpstreamWindowTtlSeconds(Window(2592000), now_s * kSecond), 2592000);
  EXPECT_EQ(UpstreamWindowTtlSeconds(Window(60), now_s * kSecond + 59 * kSecond), 60);
}

// Verifies the layout names read back as written, and nothing else is one.
TEST_F(UpstreamKeyTest, KeyLayoutNames) {
  for (KeyLayout layout : {KeyLayout::kSluice, KeyLayout::kUpstream}) {
    EXPECT_EQ(ParseKeyLayout(KeyLayoutName(layout)), layout);
  }
  EXPECT_EQ(ParseKeyLayout("Upstream"), std::nullopt);
  EXPECT_EQ(ParseKeyLayout(""), std::nullopt);
}

}  // namespace
}  // namespace sluice
