#include "server/service/admin_report.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

google::protobuf::Struct Parse(const std::string& json) {
  google::protobuf::Struct out;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &out).ok()) << json;
  return out;
}

RuleReport FixedWindowRule() {
  RuleReport rule;
  rule.params.algorithm = Algorithm::kFixedWindow;
  rule.params.limit = 2;
  rule.params.period_us = 60000000;
  rule.unit = "minute";
  rule.storage_key = "sluice:{d|user=alice}fw:60";
  rule.state.now_us = 1700000001000000;
  StoredKey& key = rule.state.keys.emplace_back();
  key.key = "sluice:{d|user=alice}fw:60:w28333333";
  key.role = "window";
  key.exists = true;
  key.ttl_ms = 59000;
  rule.state.state = FixedWindowState{1700000000000000 - 20000000, 2};
  rule.state.answer.allowed = true;
  rule.state.answer.reset_after_us = 59000000;
  rule.cache_on = true;
  rule.cached = OverLimitCache::Peeked{58000000, 1, 2};
  return rule;
}

// Verifies an inspect answer is JSON that names each part: the rule, its keys with TTL, the
// state by field, the check of 0 hits and the cache entry.
TEST(AdminReportTest, InspectAnswerIsJsonWithEveryPart) {
  InspectReport report;
  report.domain = "d";
  report.backend = "redis";
  DescriptorReport& descriptor = report.descriptors.emplace_back();
  descriptor.entries = {{"user", "alice"}};
  descriptor.matched = true;
  descriptor.stat_key = "d.user";
  descriptor.rules.push_back(FixedWindowRule());
  const std::string json = InspectReportJson(report);
  EXPECT_THAT(json, ::testing::EndsWith("}\n"));
  const auto answer = Parse(json);
  EXPECT_EQ(answer.fields().at("domain").string_value(), "d");
  const auto& rule = answer.fields()
                         .at("descriptors")
                         .list_value()
                         .values(0)
                         .struct_value()
                         .fields()
                         .at("rules")
                         .list_value()
                         .values(0)
                         .struct_value()
                         .fields();
  EXPECT_EQ(rule.at("algorithm").string_value(), "fixed_window");
  EXPECT_EQ(rule.at("limit").number_value(), 2);
  EXPECT_EQ(rule.at("storage_key").string_value(), "sluice:{d|user=alice}fw:60");
  EXPECT_EQ(rule.at("state").struct_value().fields().at("count").number_value(), 2);
  const auto& key = rule.at("keys").list_value().values(0).struct_value().fields();
  EXPECT_EQ(key.at("role").string_value(), "window");
  EXPECT_EQ(key.at("ttl_ms").number_value(), 59000);
  EXPECT_TRUE(rule.at("check_of_0_hits").struct_value().fields().at("allowed").bool_value());
  EXPECT_EQ(
      rule.at("over_limit_cache").struct_value().fields().at("denies_for_us").number_value(),
      58000000);
  EXPECT_FALSE(rule.contains("burst"));  // a window has none
}

// Verifies integers are written exactly (JSON readers that keep 64-bit integers get them whole)
// and strings are escaped, quotes and control bytes included.
TEST(AdminReportTest, WritesIntegersExactlyAndEscapesStrings) {
  InspectReport report;
  report.domain = "d\"\n";
  DescriptorReport& descriptor = report.descriptors.emplace_back();
  descriptor.entries = {{"k", "v\"\\\x01"}};
  RuleReport rule = FixedWindowRule();
  rule.state.state = FixedWindowState{0, 18446744073709551615u};
  descriptor.rules.push_back(rule);
  const std::string json = InspectReportJson(report);
  EXPECT_THAT(json, HasSubstr("\"count\":18446744073709551615"));
  EXPECT_THAT(json, HasSubstr("\"domain\":\"d\\\"\\n\""));
  EXPECT_THAT(json, HasSubstr("\"value\":\"v\\\"\\\\\\u0001\""));
  Parse(json);
}

// Verifies each algorithm's state is written by its named fields.
TEST(AdminReportTest, StateFieldsByAlgorithm) {
  EXPECT_EQ(StateJson(FixedWindowState{60000000, 3}), R"({"window_start_us":60000000,"count":3})");
  EXPECT_EQ(StateJson(SlidingWindowCounterState{60, 4, 5}),
            R"({"window_start_us":60,"current":4,"previous":5})");
  EXPECT_EQ(StateJson(TokenBucketState{}), R"({"fresh":true})");
  EXPECT_EQ(StateJson(TokenBucketState{true, 2.5, 100}), R"({"tokens":2.5,"last_refill_us":100})");
  EXPECT_EQ(StateJson(LeakyBucketState{0.25, 7}), R"({"level":0.25,"last_leak_us":7})");
  EXPECT_EQ(StateJson(GcraState{1234.5}), R"({"tat_us":1234.5})");
  SlidingWindowLogState log;
  log.entries = {{10, 1}, {20, 2}};
  log.total = 3;
  EXPECT_EQ(StateJson(log),
            R"({"entries":2,"total":3,"oldest_us":10,"newest_us":20,"log":[[10,1],[20,2]]})");
}

// Verifies a long log shows only its newest kMaxReportedLogEntries entries, but counts them all.
TEST(AdminReportTest, LongLogShowsItsNewestEntries) {
  SlidingWindowLogState log;
  for (int i = 0; i < 150; ++i) {
    log.entries.emplace_back(i, 1);
  }
  log.total = 150;
  const auto state = Parse(StateJson(log));
  EXPECT_EQ(state.fields().at("entries").number_value(), 150);
  const auto& shown = state.fields().at("log").list_value();
  ASSERT_EQ(shown.values_size(), static_cast<int>(kMaxReportedLogEntries));
  EXPECT_EQ(shown.values(0).list_value().values(0).number_value(), 50);
}

// Verifies a reset answer lists the keys deleted, what this replica forgot, what the others
// learn, and the result.
TEST(AdminReportTest, ResetAnswerSaysWhatWasDone) {
  ResetReport report;
  report.domain = "d";
  report.backend = "redis";
  DescriptorReport& descriptor = report.descriptors.emplace_back();
  descriptor.entries = {{"user", "alice"}};
  descriptor.matched = true;
  descriptor.rules.push_back(FixedWindowRule());
  report.deleted = {"k1", "k2"};
  report.forgotten_here = 1;
  report.other_replicas = "told";
  const auto answer = Parse(ResetReportJson(report));
  EXPECT_EQ(answer.fields().at("deleted").list_value().values_size(), 2);
  EXPECT_EQ(answer.fields().at("forgotten_here").number_value(), 1);
  EXPECT_EQ(answer.fields().at("other_replicas").string_value(), "told");
  EXPECT_EQ(answer.fields().at("result").string_value(), "ok");
  const auto& rule = answer.fields()
                         .at("descriptors")
                         .list_value()
                         .values(0)
                         .struct_value()
                         .fields()
                         .at("rules")
                         .list_value()
                         .values(0)
                         .struct_value()
                         .fields();
  EXPECT_FALSE(rule.contains("state"));  // a reset reads nothing
}

}  // namespace
}  // namespace sluice
