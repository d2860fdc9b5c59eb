#include "server/service/metrics.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The value of the series `name{labels}` in Prometheus text, or -1.
double SeriesValue(const std::string& text, const std::string& series) {
  const std::string line = "\n" + series + " ";
  const size_t at = text.find(line);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + line.size()));
}

// How many series of `family` the text holds.
size_t SeriesCount(const std::string& text, const std::string& family) {
  size_t series = 0;
  for (size_t at = text.find("\n" + family + "{"); at != std::string::npos;
       at = text.find("\n" + family + "{", at + 1)) {
    ++series;
  }
  return series;
}

// Verifies per-rule series are bounded: past the cap, new stat keys share the "_folded"
// counters and the fold is counted, while keys that have their own series keep them.
TEST(MetricsTest, RuleSeriesAreBoundedAndFoldedPastTheCap) {
  Metrics metrics(/*max_rule_series=*/160);  // 10 per shard
  for (int i = 0; i < 5000; ++i) {
    metrics.CountRule(absl::StrCat("d.user_", i), RuleHits{.total = 1});
  }
  const std::string text = metrics.Serialize();
  const size_t series = SeriesCount(text, "sluice_rule_total_hits");
  EXPECT_LE(series, 161u);  // the cap, plus _folded
  EXPECT_GE(series, 100u);
  EXPECT_THAT(text, HasSubstr("sluice_rule_total_hits{key=\"_folded\"}"));
  EXPECT_EQ(SeriesValue(text, "sluice_rule_series"), static_cast<double>(series - 1));
  // Every lookup was counted somewhere: 5000 hits in all.
  double total = 0;
  for (size_t at = text.find("\nsluice_rule_total_hits{"); at != std::string::npos;
       at = text.find("\nsluice_rule_total_hits{", at + 1)) {
    total += std::stod(text.substr(text.find("} ", at) + 2));
  }
  EXPECT_EQ(total, 5000);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_keys_folded_total"), 5000.0 - (series - 1));
  // A key with its own series keeps it; a new one folds.
  metrics.CountRule("d.user_0", RuleHits{.total = 1});
  metrics.CountRule("d.never_seen_before", RuleHits{.total = 1});
  const std::string after = metrics.Serialize();
  EXPECT_EQ(SeriesValue(after, "sluice_rule_total_hits{key=\"d.user_0\"}"), 2);
  EXPECT_EQ(SeriesValue(after, "sluice_rule_total_hits{key=\"d.never_seen_before\"}"), -1);
}

// Verifies each counter of a descriptor's hits lands in its own family, under the key.
TEST(MetricsTest, CountRuleAddsEveryCounter) {
  Metrics metrics;
  metrics.CountRule("d.k_v", RuleHits{.total = 6,
                                      .within_limit = 1,
                                      .near_limit = 2,
                                      .over_limit = 3,
                                      .over_limit_with_local_cache = 4,
                                      .shadow_mode = 5});
  const std::string text = metrics.Serialize();
  EXPECT_EQ(SeriesValue(text, "sluice_rule_total_hits{key=\"d.k_v\"}"), 6);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_within_limit{key=\"d.k_v\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_near_limit{key=\"d.k_v\"}"), 2);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_over_limit{key=\"d.k_v\"}"), 3);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_over_limit_with_local_cache{key=\"d.k_v\"}"), 4);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_shadow_mode{key=\"d.k_v\"}"), 5);
  EXPECT_THAT(text, HasSubstr("# TYPE sluice_rule_near_limit counter\n"));
}

// Verifies a node's counters are its stat key's, for each Metrics object on its own: the memo
// the first one keeps on the node never hands its counters to another.
TEST(MetricsTest, CountNodeCountsUnderTheNodesStatKey) {
  DescriptorNode node;
  node.full_key = "d.user";
  Metrics first;
  Metrics second;
  first.CountNode(node, RuleHits{.total = 1});
  first.CountNode(node, RuleHits{.total = 1});  // now through the memo
  first.CountRule("d.user", RuleHits{.total = 1});
  second.CountNode(node, RuleHits{.total = 3});
  EXPECT_EQ(SeriesValue(first.Serialize(), "sluice_rule_total_hits{key=\"d.user\"}"), 3);
  EXPECT_EQ(SeriesValue(second.Serialize(), "sluice_rule_total_hits{key=\"d.user\"}"), 3);
}

// Verifies a flood of request values cannot fold the config's own keys: a node counted after
// the cap is full still gets a series of its own.
TEST(MetricsTest, ConfigKeysAreNeverFolded) {
  Metrics metrics(/*max_rule_series=*/16);  // 1 per shard
  for (int i = 0; i < 200; ++i) {
    metrics.CountRule(absl::StrCat("d.fill_", i), RuleHits{.total = 1});
  }
  DescriptorNode node;
  node.full_key = "d.late";
  metrics.CountNode(node, RuleHits{.total = 2});
  const std::string text = metrics.Serialize();
  EXPECT_EQ(SeriesValue(text, "sluice_rule_total_hits{key=\"d.late\"}"), 2);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_keys_folded_total"), 200 - 16);
}

// Verifies a label value is never longer than kMaxStatKeyBytes: a long key is shown as its
// first bytes and a hash, the same in every Metrics object (so on every replica), and two long
// keys that differ only past the cut stay apart.
TEST(MetricsTest, LongStatKeysAreShortened) {
  const std::string prefix = "d.user_" + std::string(1000, 'x');
  const std::string a = ShortStatKey(prefix + "a");
  const std::string b = ShortStatKey(prefix + "b");
  EXPECT_LE(a.size(), kMaxStatKeyBytes);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, 16), prefix.substr(0, 16));
  EXPECT_EQ(ShortStatKey("d.short_key"), "d.short_key");
  // Not cut inside a UTF-8 character: "é" is two bytes, and the cut would fall between them.
  std::string accents;
  while (accents.size() < 600) {
    accents += "\xc3\xa9";
  }
  const std::string cut = ShortStatKey("d." + accents);
  const size_t hash = cut.rfind('#');
  EXPECT_EQ((hash - 2) % 2, 0u) << cut;

  Metrics first;
  Metrics second;
  first.CountRule(prefix + "a", RuleHits{.total = 1});
  second.CountRule(prefix + "a", RuleHits{.total = 1});
  first.CountRule(prefix + "b", RuleHits{.total = 1});
  const std::string text = first.Serialize();
  EXPECT_EQ(SeriesValue(text, "sluice_rule_total_hits{key=\"" + a + "\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_total_hits{key=\"" + b + "\"}"), 1);
  EXPECT_EQ(SeriesValue(second.Serialize(), "sluice_rule_total_hits{key=\"" + a + "\"}"), 1);
  EXPECT_THAT(text, Not(HasSubstr(prefix)));
}

// Verifies a series unused for the ttl is dropped and its place under the cap freed, while a
// series counted through a node lives as long as the node, then for the ttl after.
TEST(MetricsTest, UnusedSeriesExpire) {
  FakeClock clock;
  Metrics metrics(MetricsOptions{.max_rule_series = 16, .rule_series_ttl = absl::Minutes(10)},
                  clock);
  auto node = std::make_unique<DescriptorNode>();
  node->full_key = "d.configured";
  metrics.CountNode(*node, RuleHits{.total = 1});
  for (int i = 0; i < 200; ++i) {
    metrics.CountRule(absl::StrCat("d.flood_", i), RuleHits{.total = 1});
  }
  EXPECT_EQ(SeriesValue(metrics.Serialize(), "sluice_rule_series"), 17);
  clock.AdvanceMicros(absl::ToInt64Microseconds(absl::Minutes(9)));
  metrics.CountRule("d.flood_0", RuleHits{.total = 1});  // kept in use, if it has a series
  clock.AdvanceMicros(absl::ToInt64Microseconds(absl::Minutes(2)));
  std::string text = metrics.Serialize();
  // d.flood_0, counted first, had a series; the other 15 shards' went unused.
  EXPECT_EQ(SeriesValue(text, "sluice_rule_series_expired_total"), 15);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_total_hits{key=\"d.configured\"}"), 1);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_total_hits{key=\"d.flood_0\"}"), 2);
  EXPECT_EQ(SeriesValue(text, "sluice_rule_series"), 2);
  // Places freed: new keys get series of their own again, one in each free shard (400 keys
  // miss one of 15 shards with a chance of 1e-10).
  for (int i = 0; i < 400; ++i) {
    metrics.CountRule(absl::StrCat("d.new_", i), RuleHits{.total = 1});
  }
  EXPECT_EQ(SeriesValue(metrics.Serialize(), "sluice_rule_series"), 17);
  // The node's config goes away: its series is dropped a ttl later.
  node.reset();
  clock.AdvanceMicros(absl::ToInt64Microseconds(absl::Minutes(5)));
  EXPECT_THAT(metrics.Serialize(), HasSubstr("d.configured\""));
  clock.AdvanceMicros(absl::ToInt64Microseconds(absl::Minutes(6)));
  EXPECT_THAT(metrics.Serialize(), Not(HasSubstr("d.configured\"")));
}

// Verifies the page stays within its byte bound however many long series there are, keeping
// the config's keys and the most hit first, and saying how many were left out.
TEST(MetricsTest, PageStaysWithinItsBound) {
  constexpr size_t kMaxPage = 256 << 10;
  Metrics metrics(MetricsOptions{.max_rule_series = 40000, .max_page_bytes = kMaxPage});
  DescriptorNode node;
  node.full_key = "d.configured";
  metrics.CountNode(node, RuleHits{.total = 1});
  metrics.CountRule("d.hot_" + std::string(1000, 'h'), RuleHits{.total = 1000});
  for (int i = 0; i < 10000; ++i) {
    metrics.CountRule(absl::StrCat("d.user_", i, "_", std::string(1000, 'v')),
                      RuleHits{.total = 1});
  }
  const std::string text = metrics.Serialize();
  EXPECT_LE(text.size(), kMaxPage + 2048);
  EXPECT_THAT(text, HasSubstr("sluice_rule_total_hits{key=\"d.configured\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("} 1000\n"));  // the hot key
  const double left_out = SeriesValue(text, "sluice_metrics_rule_series_left_out");
  const size_t shown = SeriesCount(text, "sluice_rule_total_hits") - 1;  // not _folded
  EXPECT_GT(left_out, 9000);
  EXPECT_EQ(shown + static_cast<size_t>(left_out), 10002u);
  // Every family lists the same series.
  EXPECT_EQ(SeriesCount(text, "sluice_rule_shadow_mode"), shown + 1);
}

// Verifies counting from many threads while scrapes snapshot and sweep the series loses no
// hit and touches no freed series (run under the sanitizers too): series made, counted through
// node memos that come and go, snapshotted and dropped, all at once.
TEST(MetricsTest, CountingRacesScrapesSafely) {
  FakeClock clock;
  Metrics metrics(MetricsOptions{.max_rule_series = 1 << 20, .rule_series_ttl = absl::Minutes(1)},
                  clock);
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::atomic<bool> counting{true};
  std::thread scraper([&] {
    while (counting.load()) {
      clock.AdvanceMicros(absl::ToInt64Microseconds(absl::Seconds(30)));  // series expire
      metrics.Serialize();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kRounds; ++i) {
        DescriptorNode node;  // its memo holds the series for this round only
        node.full_key = absl::StrCat("d.node_", i % 7);
        metrics.CountNode(node, RuleHits{.total = 1});
        metrics.CountNode(node, RuleHits{.total = 1});
        metrics.CountRule(absl::StrCat("d.user_", t, "_", i % 50), RuleHits{.total = 1});
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  counting.store(false);
  scraper.join();
  // Counts on series that expired are gone with them; what is left, nothing folded, must not
  // exceed what was counted.
  const std::string text = metrics.Serialize();
  EXPECT_EQ(SeriesValue(text, "sluice_rule_keys_folded_total"), 0);
  double total = 0;
  for (size_t at = text.find("\nsluice_rule_total_hits{"); at != std::string::npos;
       at = text.find("\nsluice_rule_total_hits{", at + 1)) {
    total += std::stod(text.substr(text.find("} ", at) + 2));
  }
  EXPECT_LE(total, 3.0 * kThreads * kRounds);
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
