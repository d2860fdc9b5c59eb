#include "server/service/metrics.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Verifies per-rule series are bounded: past the cap, new stat keys share the "_folded"
// counters and the fold is counted, while keys that have their own series keep them.
TEST(MetricsTest, RuleSeriesAreBoundedAndFoldedPastTheCap) {
  Metrics metrics(/*max_rule_series=*/160);  // 10 per shard
  for (int i = 0; i < 5000; ++i) {
    metrics.ForRule(absl::StrCat("d.user_", i)).total_hits->Increment();
  }
  const std::string text = metrics.Serialize();
  size_t series = 0;
  for (size_t at = text.find("sluice_rule_total_hits{"); at != std::string::npos;
       at = text.find("sluice_rule_total_hits{", at + 1)) {
    ++series;
  }
  EXPECT_LE(series, 161u);  // the cap, plus _folded
  EXPECT_GE(series, 100u);
  EXPECT_THAT(text, HasSubstr("sluice_rule_total_hits{key=\"_folded\"}"));
  // Every lookup was counted somewhere: 5000 hits in all.
  double total = 0;
  for (size_t at = text.find("sluice_rule_total_hits{"); at != std::string::npos;
       at = text.find("sluice_rule_total_hits{", at + 1)) {
    total += std::stod(text.substr(text.find("} ", at) + 2));
  }
  EXPECT_EQ(total, 5000);
  EXPECT_THAT(text, Not(HasSubstr("sluice_rule_keys_folded_total 0\n")));
  // A key with its own series keeps it.
  EXPECT_NE(metrics.ForRule("d.user_0").total_hits,
            metrics.ForRule("d.never_seen_before").total_hits);
  EXPECT_EQ(metrics.ForRule("d.user_0").total_hits, metrics.ForRule("d.user_0").total_hits);
}

// Verifies a node's counters are its stat key's, for each Metrics object on its own: the memo
// the first one keeps on the node never hands its counters to another.
TEST(MetricsTest, ForNodeGivesTheCountersOfTheNodesStatKey) {
  DescriptorNode node;
  node.full_key = "d.user";
  Metrics first;
  Metrics second;
  const RuleCounters a = first.ForNode(node);
  EXPECT_EQ(a.total_hits, first.ForRule("d.user").total_hits);
  EXPECT_EQ(a.over_limit_with_local_cache, first.ForRule("d.user").over_limit_with_local_cache);
  EXPECT_EQ(first.ForNode(node).total_hits, a.total_hits);  // now from the memo
  const RuleCounters b = second.ForNode(node);
  EXPECT_NE(b.total_hits, a.total_hits);
  EXPECT_EQ(b.total_hits, second.ForRule("d.user").total_hits);
  second.ForNode(node).total_hits->Increment(3);
  EXPECT_THAT(second.Serialize(), HasSubstr("sluice_rule_total_hits{key=\"d.user\"} 3"));
  EXPECT_THAT(first.Serialize(), HasSubstr("sluice_rule_total_hits{key=\"d.user\"} 0"));
}

// Verifies a node whose key is folded past the cap is not memoized: every lookup of it is
// counted as folded, as for ForRule.
TEST(MetricsTest, ForNodeCountsEveryFoldedLookup) {
  Metrics metrics(/*max_rule_series=*/16);  // 1 per shard
  for (int i = 0; i < 200; ++i) {
    metrics.ForRule(absl::StrCat("d.fill_", i));
  }
  DescriptorNode node;
  node.full_key = "d.late";
  ASSERT_EQ(metrics.ForNode(node).total_hits, metrics.ForRule(Metrics::kFoldedKey).total_hits);
  const std::string before = metrics.Serialize();
  metrics.ForNode(node);
  metrics.ForNode(node);
  const auto folded = [](const std::string& text) {
    const std::string name = "\nsluice_rule_keys_folded_total ";
    return std::stod(text.substr(text.find(name) + name.size()));
  };
  EXPECT_EQ(folded(metrics.Serialize()), folded(before) + 2);
}

// Verifies each config put in force bumps the generation, sets its load time, and replaces the
// version series (one sluice_config_info series at a time).
TEST(MetricsTest, ConfigInForceReplacesTheVersion) {
  Metrics metrics;
  metrics.ConfigInForce(3, "aaaa", absl::FromUnixSeconds(1700000000));
  metrics.ConfigInForce(5, "bbbb", absl::FromUnixSeconds(1700000060));
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("sluice_config_generation 2\n"));
  EXPECT_THAT(text, HasSubstr("sluice_config_rules 5\n"));
  EXPECT_THAT(text, HasSubstr("sluice_config_load_timestamp_seconds 1700000060\n"));
  EXPECT_THAT(text, HasSubstr("sluice_config_info{version=\"bbbb\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("aaaa")));
}

// Verifies the request latency histograms are served per transport, in seconds.
TEST(MetricsTest, RequestLatencyIsAHistogramPerTransport) {
  Metrics metrics;
  metrics.RequestLatency(Transport::kGrpc).Record(800);
  metrics.RequestLatency(Transport::kGrpc).Record(30000);
  metrics.RequestLatency(Transport::kHttp).Record(10);
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("# TYPE sluice_request_duration_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("sluice_request_duration_seconds_bucket{transport=\"grpc\",le=\"0.001\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("sluice_request_duration_seconds_bucket{transport=\"grpc\",le=\"0.05\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("sluice_request_duration_seconds_count{transport=\"grpc\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("sluice_request_duration_seconds_sum{transport=\"grpc\"} 0.0308\n"));
  EXPECT_THAT(text, HasSubstr("sluice_request_duration_seconds_count{transport=\"http\"} 1\n"));
}

}  // namespace
}  // namespace sluice
