#include "server/stats/statsd_encoder.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

StatsdSample Counter(std::string name, uint64_t value,
                     std::shared_ptr<const void> series = nullptr) {
  StatsdSample sample;
  sample.name = std::move(name);
  sample.type = StatsdType::kCounter;
  sample.value = value;
  sample.series = std::move(series);
  return sample;
}

// A response-time sample with `count` more observations of `us` each than `before`.
StatsdSample Timer(MetricHistogram& histogram, int count, int64_t us) {
  for (int i = 0; i < count; ++i) {
    histogram.Record(us);
  }
  StatsdSample sample;
  sample.name = "ratelimit_server.ShouldRateLimit.response_time";
  sample.type = StatsdType::kObserver;
  sample.observations = histogram.snapshot();
  return sample;
}

// Every line of `payloads`, without its '\n'.
std::vector<std::string> Lines(const std::vector<std::string>& payloads) {
  std::vector<std::string> lines;
  for (const std::string& payload : payloads) {
    for (absl::string_view line : absl::StrSplit(payload, '\n', absl::SkipEmpty())) {
      lines.emplace_back(line);
    }
  }
  return lines;
}

StatsdEncoder Plain(std::vector<StatsdTag> extra_tags = {}) {
  StatsdEncoderOptions options;
  options.extra_tags = std::move(extra_tags);
  return StatsdEncoder(options, StatsdMogrifiers());
}

constexpr char kHits[] = "ratelimit.service.rate_limit.gw.user.total_hits";

// Verifies counters send their increase since the last flush that left, as gostats' latch,
// and nothing while they stand still.
TEST(StatsdEncoderTest, CountersSendIncreases) {
  StatsdEncoder encoder = Plain();
  EXPECT_THAT(Lines(encoder.Encode({Counter(kHits, 3),
                                    Counter("ratelimit.service.config_load_success", 1)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:3|c",
                          "ratelimit.service.config_load_success:1|c"));
  encoder.Commit();
  EXPECT_THAT(Lines(encoder.Encode({Counter(kHits, 5),
                                    Counter("ratelimit.service.config_load_success", 1)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:2|c"));
  encoder.Commit();
  EXPECT_THAT(encoder.Encode({Counter(kHits, 5)}), IsEmpty());
}

// Verifies a flush whose payloads did not leave (no Commit) is sent again with what came since,
// so no count is lost while the statsd is away.
TEST(StatsdEncoderTest, UncommittedIncreasesGoWithTheNextFlush) {
  StatsdEncoder encoder = Plain();
  encoder.Encode({Counter(kHits, 3)});
  EXPECT_THAT(Lines(encoder.Encode({Counter(kHits, 4)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:4|c"));
  encoder.Commit();
  EXPECT_THAT(Lines(encoder.Encode({Counter(kHits, 6)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:2|c"));
}

// Verifies a per-rule series made again (dropped after --rule_metric_ttl, counted again) sends
// its whole value, whether it is below or above what the old one sent.
TEST(StatsdEncoderTest, ASeriesMadeAgainCountsFromZero) {
  StatsdEncoder encoder = Plain();
  auto first = std::make_shared<int>(1);
  encoder.Encode({Counter(kHits, 100, first)});
  encoder.Commit();
  auto second = std::make_shared<int>(2);
  EXPECT_THAT(Lines(encoder.Encode({Counter(kHits, 150, second)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:150|c"));
  encoder.Commit();
  // Gone from a flush (its series dropped), then back below what was sent: from 0 too.
  encoder.Encode({});
  encoder.Commit();
  EXPECT_THAT(Lines(encoder.Encode({Counter(kHits, 7, second)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:7|c"));
}

// Verifies EXTRA_TAGS go into plain statsd names as gostats serializes them.
TEST(StatsdEncoderTest, PlainStatsdCarriesExtraTagsInTheName) {
  StatsdEncoder encoder = Plain({{"version", "1.2"}, {"cluster", "eu"}});
  EXPECT_THAT(Lines(encoder.Encode({Counter(kHits, 3)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits.__cluster=eu."
                          "__version=1_2:3|c"));
}

// Verifies DogStatsD lines: global tags first, the extra tags separated from the name (in
// gostats' order), then the mogrifier's, as godogstats' FlushCounter sends them; upstream's
// TestSinkMogrify cases (one rule prefixing "custom." and adding two tags).
TEST(StatsdEncoderTest, DogStatsdSeparatesTagsAndMogrifies) {
  auto mogrifiers = StatsdMogrifiers::Create(
      {StatsdMogrifierRule{"C", R"(^ratelimit\.(.*)$)", "custom.$1",
                           {{"tag1", "value1"}, {"tag2", "value2"}}}});
  ASSERT_TRUE(mogrifiers.ok());
  StatsdEncoderOptions options;
  options.dogstatsd = true;
  options.extra_tags = {{"DEPLOY", "67890"}, {"COMMIT", "12345"}};
  StatsdEncoder encoder(options, std::move(*mogrifiers));
  std::string name;
  std::vector<std::string> tags;
  encoder.NameAndTags("ratelimit.service.rate_limit.mongo_cps.database_users.total_hits", &name,
                      &tags);
  EXPECT_EQ(name, "custom.service.rate_limit.mongo_cps.database_users.total_hits");
  EXPECT_THAT(tags, ElementsAre("COMMIT:12345", "DEPLOY:67890", "tag1:value1", "tag2:value2"));
  encoder.NameAndTags("foo.service.rate_limit.mongo_cps.database_users.total_hits", &name, &tags);
  EXPECT_EQ(name, "foo.service.rate_limit.mongo_cps.database_users.total_hits");
  EXPECT_THAT(tags, ElementsAre("COMMIT:12345", "DEPLOY:67890"));

  options.extra_tags.clear();
  options.global_tags = {"env:prod", "service:rl"};
  StatsdEncoder plain_names(options, StatsdMogrifiers());
  plain_names.NameAndTags("other.metric.name", &name, &tags);
  EXPECT_EQ(name, "other.metric.name");
  EXPECT_THAT(tags, ElementsAre("env:prod", "service:rl"));
  EXPECT_THAT(Lines(plain_names.Encode({Counter(kHits, 2)})),
              ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:2|c|#env:prod,"
                          "service:rl"));
}

// Verifies timer lines: up to ten observations of a bucket as lines of their own in whole
// milliseconds (upstream truncates: sub-millisecond calls are 0), more as one sampled line,
// and only the observations new since the last flush.
TEST(StatsdEncoderTest, TimersSendNewObservations) {
  StatsdEncoder encoder = Plain();
  MetricHistogram histogram;
  EXPECT_THAT(Lines(encoder.Encode({Timer(histogram, 3, 300)})),
              ElementsAre("ratelimit_server.ShouldRateLimit.response_time:0|ms",
                          "ratelimit_server.ShouldRateLimit.response_time:0|ms",
                          "ratelimit_server.ShouldRateLimit.response_time:0|ms"));
  encoder.Commit();
  // 100 more of 3.2 ms: one bucket, its mean (3 ms), one line standing for 100.
  EXPECT_THAT(Lines(encoder.Encode({Timer(histogram, 100, 3200)})),
              ElementsAre("ratelimit_server.ShouldRateLimit.response_time:3|ms|@" +
                          StatsdSampleRate(100)));
  encoder.Commit();
  EXPECT_THAT(encoder.Encode({Timer(histogram, 0, 0)}), IsEmpty());
  // Two buckets: each at its middle in whole ms (1000-2000 us: 1; 10-12 ms: 11).
  histogram.Record(1500);
  EXPECT_THAT(Lines(encoder.Encode({Timer(histogram, 2, 11000)})),
              ElementsAre("ratelimit_server.ShouldRateLimit.response_time:1|ms",
                          "ratelimit_server.ShouldRateLimit.response_time:11|ms",
                          "ratelimit_server.ShouldRateLimit.response_time:11|ms"));
}

// Verifies the value a bucket's observations are sent as.
TEST(StatsdEncoderTest, TimerBucketValues) {
  EXPECT_EQ(StatsdTimerBucketMs(0, -1), 0u);                              // up to 5 us
  EXPECT_EQ(StatsdTimerBucketMs(7, -1), 0u);                              // 500 us - 1 ms
  EXPECT_EQ(StatsdTimerBucketMs(8, -1), 1u);                              // 1 - 2 ms
  EXPECT_EQ(StatsdTimerBucketMs(8, 1999), 1u);                            // a mean within
  EXPECT_EQ(StatsdTimerBucketMs(8, 5000), 2u);                            // held to the bucket
  EXPECT_EQ(StatsdTimerBucketMs(MetricHistogram::kBoundsUs.size(), -1), 10000u);  // over 10 s
}

// Verifies a flush bigger than one datagram is split into datagrams of whole lines.
TEST(StatsdEncoderTest, ManyNamesMakeSeveralPayloads) {
  StatsdEncoder encoder = Plain();
  std::vector<StatsdSample> samples;
  for (int i = 0; i < 200; ++i) {
    samples.push_back(Counter(absl::StrCat("ratelimit.service.rate_limit.gw.user_", i,
                                           ".total_hits"),
                              1));
  }
  std::vector<std::string> payloads = encoder.Encode(samples);
  EXPECT_GT(payloads.size(), 5u);
  for (const std::string& payload : payloads) {
    EXPECT_LE(payload.size(), kStatsdUdpPayloadBytes);
  }
  EXPECT_EQ(Lines(payloads).size(), 200u);
}

}  // namespace
}  // namespace sluice
