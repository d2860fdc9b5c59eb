#include "server/stats/statsd_lines.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

std::string Line(absl::string_view name, absl::string_view value, StatsdLineType type,
                 absl::string_view rate = "", const std::vector<std::string>& tags = {}) {
  std::string out;
  AppendStatsdLine(&out, name, value, type, rate, tags);
  return out;
}

// Verifies the line shapes of gostats' net sink ("name:3|c\n", "|g", "|ms") and of datadog-go
// (rate, then "|#" and the tags joined by ','), one '\n' after each.
TEST(StatsdLinesTest, LineShapes) {
  EXPECT_EQ(Line("ratelimit.service.rate_limit.gw.user.total_hits", "3", StatsdLineType::kCounter),
            "ratelimit.service.rate_limit.gw.user.total_hits:3|c\n");
  EXPECT_EQ(Line("g", "7", StatsdLineType::kGauge), "g:7|g\n");
  EXPECT_EQ(Line("ratelimit_server.ShouldRateLimit.response_time", "0", StatsdLineType::kTimer),
            "ratelimit_server.ShouldRateLimit.response_time:0|ms\n");
  EXPECT_EQ(Line("t", "4", StatsdLineType::kTimer, "0.01"), "t:4|ms|@0.01\n");
  EXPECT_EQ(Line("c", "1", StatsdLineType::kCounter, "", {"env:prod", "domain:gw"}),
            "c:1|c|#env:prod,domain:gw\n");
  EXPECT_EQ(Line("t", "2", StatsdLineType::kTimer, "0.5", {"a:b"}), "t:2|ms|@0.5|#a:b\n");
}

// Verifies a newline a request value put in a stat key cannot start a forged line: '_' in a
// name, dropped from a tag (as datadog-go drops it).
TEST(StatsdLinesTest, NewlinesCannotForgeLines) {
  EXPECT_EQ(Line("d.k_a\nevil:999", "1", StatsdLineType::kCounter, "", {"t:x\ny"}),
            "d.k_a_evil:999:1|c|#t:xy\n");
}

// Verifies EXTRA_TAGS as a gostats scope holds them: sorted by key, '.', ':' and '|' in values
// made '_' (keys kept), empty keys or values dropped, the last of a repeated key kept.
TEST(StatsdLinesTest, GostatsTagSet) {
  EXPECT_THAT(GostatsTagSet({{"version", "1.2.3"}, {"commit", "a:b|c"}, {"k.x", "v"}}),
              ElementsAre(Pair("commit", "a_b_c"), Pair("k.x", "v"), Pair("version", "1_2_3")));
  EXPECT_THAT(GostatsTagSet({{"", "v"}, {"k", ""}, {"a", "1"}, {"a", "2"}}),
              ElementsAre(Pair("a", "2")));
  EXPECT_THAT(GostatsTagSet({}), IsEmpty());
}

// Verifies tags serialized into a name as gostats' TagSet.Serialize: ".__key=value" each.
TEST(StatsdLinesTest, SerializesTagsIntoTheName) {
  EXPECT_EQ(GostatsTaggedName("ratelimit.service.config_load_success",
                              GostatsTagSet({{"DEPLOY", "67890"}, {"COMMIT", "12345"}})),
            "ratelimit.service.config_load_success.__COMMIT=12345.__DEPLOY=67890");
  EXPECT_EQ(GostatsTaggedName("n", {}), "n");
}

// Verifies godogstats' separateTags on upstream's own cases (dogstatsd_sink_test.go,
// TestSeparateExtraTags).
TEST(StatsdLinesTest, SeparatesTagsAsGodogstats) {
  struct Case {
    std::string given;
    std::string name;
    std::vector<std::string> tags;
  };
  const std::vector<Case> cases = {
      {"ratelimit.service.rate_limit.mongo_cps.database_users.total_hits",
       "ratelimit.service.rate_limit.mongo_cps.database_users.total_hits",
       {}},
      {"ratelimit.service.rate_limit.mongo_cps.database_users.total_hits.__COMMIT=12345",
       "ratelimit.service.rate_limit.mongo_cps.database_users.total_hits",
       {"COMMIT:12345"}},
      {"ratelimit.service.rate_limit.mongo_cps.database_users.total_hits.__COMMIT=12345.__DEPLOY="
       "6890",
       "ratelimit.service.rate_limit.mongo_cps.database_users.total_hits",
       {"COMMIT:12345", "DEPLOY:6890"}},
      {"ratelimit.service.rate_limit.mongo_cps.database_users.total_hits.__COMMIT",
       "ratelimit.service.rate_limit.mongo_cps.database_users.total_hits",
       {}},
  };
  for (const Case& c : cases) {
    SeparatedName separated = SeparateGostatsTags(c.given);
    EXPECT_EQ(separated.name, c.name) << c.given;
    EXPECT_EQ(separated.tags, c.tags) << c.given;
  }
}

// Verifies a sample rate makes every reader count the observations it stands for:
// statsd_exporter repeats int(1/rate) times, etsy statsd and the Datadog agent add 1/rate.
TEST(StatsdLinesTest, SampleRateCountsExactly) {
  for (uint64_t count : {2ull, 3ull, 7ull, 10ull, 11ull, 49ull, 97ull, 100ull, 1000ull, 9999ull,
                         123457ull, 10000000ull}) {
    const std::string text = StatsdSampleRate(count);
    double rate = 0;
    ASSERT_TRUE(absl::SimpleAtod(text, &rate)) << text;
    EXPECT_LT(rate, 1.0);
    EXPECT_EQ(static_cast<uint64_t>(1 / rate), count) << text;
    EXPECT_NEAR(1 / rate, static_cast<double>(count), 1e-6 * static_cast<double>(count)) << text;
  }
  for (uint64_t count = 2; count < 5000; ++count) {
    double rate = 0;
    ASSERT_TRUE(absl::SimpleAtod(StatsdSampleRate(count), &rate));
    ASSERT_EQ(static_cast<uint64_t>(1 / rate), count);
  }
}

// Verifies lines are packed whole into payloads of at most 1432 bytes (gostats'
// defaultBufferSizeUDP, datadog-go's OptimalUDPPayloadSize), in order, and a line longer than
// that travels alone.
TEST(StatsdLinesTest, PacksWholeLinesWithinThePayloadSize) {
  StatsdPayloads payloads(kStatsdUdpPayloadBytes);
  std::vector<std::string> lines;
  for (int i = 0; i < 100; ++i) {
    lines.push_back(Line(absl::StrCat("ratelimit.service.rate_limit.gw.user_", i, ".total_hits"),
                         absl::StrCat(i), StatsdLineType::kCounter));
    payloads.Add(lines.back());
  }
  const std::string huge = Line(std::string(3000, 'x'), "1", StatsdLineType::kCounter);
  payloads.Add(huge);
  payloads.Add(lines[0]);
  std::vector<std::string> out = payloads.Take();
  ASSERT_GE(out.size(), 4u);
  std::string joined;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string& payload = out[i];
    ASSERT_FALSE(payload.empty());
    EXPECT_EQ(payload.back(), '\n');
    if (payload != huge) {
      EXPECT_LE(payload.size(), kStatsdUdpPayloadBytes);
    }
    // Full: the next line would not have fitted.
    if (i + 1 < out.size() && payload != huge && out[i + 1] != huge) {
      const size_t next_line = out[i + 1].find('\n') + 1;
      EXPECT_GT(payload.size() + next_line, kStatsdUdpPayloadBytes);
    }
    joined += payload;
  }
  std::string expected;
  for (const std::string& line : lines) {
    expected += line;
  }
  expected += huge + lines[0];
  EXPECT_EQ(joined, expected);
  EXPECT_THAT(payloads.Take(), IsEmpty());
}

}  // namespace
}  // namespace sluice
