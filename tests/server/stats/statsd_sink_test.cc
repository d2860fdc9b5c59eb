#include "server/stats/statsd_sink.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/statsd_listener.h"

namespace sluice {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using testing::StatsdListener;

constexpr char kHits[] = "ratelimit.service.rate_limit.gw.user.total_hits";

std::unique_ptr<StatsdSink> Sink(const Metrics& metrics, std::string address,
                                 StatsdProtocol protocol = StatsdProtocol::kUdp,
                                 absl::Duration interval = absl::Hours(1)) {
  StatsdSinkOptions options;
  options.address = std::move(address);
  options.protocol = protocol;
  options.flush_interval = interval;
  auto sink = StatsdSink::Create(metrics, std::move(options));
  EXPECT_TRUE(sink.ok()) << sink.status();
  return sink.ok() ? std::move(*sink) : nullptr;
}

// Verifies a flush sends upstream's names with the counts Sluice's own counters hold, over UDP
// to a real socket, and a second flush only what changed.
TEST(StatsdSinkTest, SendsIncreasesOverUdp) {
  StatsdListener statsd;
  Metrics metrics;
  metrics.CountRule("gw.user", RuleHits{.total = 3, .within_limit = 2, .over_limit = 1});
  auto sink = Sink(metrics, statsd.address());
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(sink->Flush().ok());
  auto has = [](const std::string& line) {
    return [line](const std::vector<std::string>& lines) {
      return std::find(lines.begin(), lines.end(), line) != lines.end();
    };
  };
  std::vector<std::string> lines =
      statsd.WaitFor(has("ratelimit.service.rate_limit.gw.user.within_limit:2|c"),
                     std::chrono::seconds(5));
  EXPECT_THAT(lines, ElementsAre("ratelimit.service.rate_limit.gw.user.total_hits:3|c",
                                 "ratelimit.service.rate_limit.gw.user.over_limit:1|c",
                                 "ratelimit.service.rate_limit.gw.user.within_limit:2|c"));
  metrics.CountRule("gw.user", RuleHits{.total = 1, .within_limit = 1});
  ASSERT_TRUE(sink->Flush().ok());
  lines = statsd.WaitFor([](const std::vector<std::string>& l) { return l.size() >= 5; },
                         std::chrono::seconds(5));
  EXPECT_THAT(StatsdListener::SumCounters(lines),
              ElementsAre(Pair("ratelimit.service.rate_limit.gw.user.over_limit", 1),
                          Pair("ratelimit.service.rate_limit.gw.user.total_hits", 4),
                          Pair("ratelimit.service.rate_limit.gw.user.within_limit", 3)));
}

// Verifies gostats' default transport: TCP. While nothing listens the counts are kept, and the
// first flush that connects sends them all, so a statsd that starts late misses nothing.
TEST(StatsdSinkTest, TcpKeepsCountsUntilItConnects) {
  const int port = testing::FreePort();
  Metrics metrics;
  metrics.CountRule("gw.user", RuleHits{.total = 2});
  auto sink = Sink(metrics, absl::StrCat("127.0.0.1:", port), StatsdProtocol::kTcp);
  ASSERT_NE(sink, nullptr);
  const absl::Status refused = sink->Flush();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("cannot connect"));
  metrics.CountRule("gw.user", RuleHits{.total = 5});
  StatsdListener statsd(StatsdListener::Protocol::kTcp, port);
  ASSERT_TRUE(sink->Flush().ok());
  std::vector<std::string> lines = statsd.WaitFor(
      [](const std::vector<std::string>& l) { return !l.empty(); }, std::chrono::seconds(5));
  EXPECT_THAT(lines, ElementsAre(absl::StrCat(kHits, ":7|c")));
}

// Verifies the flush thread sends every interval on its own, and Stop sends what came last.
TEST(StatsdSinkTest, FlushesOnItsOwnAndOnStop) {
  StatsdListener statsd;
  Metrics metrics;
  auto sink = Sink(metrics, statsd.address(), StatsdProtocol::kUdp, absl::Milliseconds(50));
  ASSERT_NE(sink, nullptr);
  sink->Start();
  metrics.CountRule("gw.user", RuleHits{.total = 1});
  std::vector<std::string> lines = statsd.WaitFor(
      [](const std::vector<std::string>& l) { return !l.empty(); }, std::chrono::seconds(5));
  EXPECT_THAT(lines, ElementsAre(absl::StrCat(kHits, ":1|c")));
  sink = Sink(metrics, statsd.address(), StatsdProtocol::kUdp, absl::Hours(1));
  ASSERT_NE(sink, nullptr);
  sink->Start();
  metrics.CountRule("gw.user", RuleHits{.total = 1});
  sink->Stop();
  lines = statsd.WaitFor([](const std::vector<std::string>& l) { return l.size() >= 2; },
                         std::chrono::seconds(5));
  // A new sink counts from its start: the whole total (2) on Stop.
  EXPECT_THAT(lines, ElementsAre(absl::StrCat(kHits, ":1|c"), absl::StrCat(kHits, ":2|c")));
}

// Verifies mogrifiers that do not compile are refused when the sink is made.
TEST(StatsdSinkTest, RefusesBadMogrifiers) {
  Metrics metrics;
  StatsdSinkOptions options;
  options.address = "127.0.0.1:1";
  options.encoder.dogstatsd = true;
  options.mogrifiers = {StatsdMogrifierRule{"BAD", "(", "n", {}}};
  auto sink = StatsdSink::Create(metrics, options);
  ASSERT_FALSE(sink.ok());
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("mogrifier BAD"));
}

}  // namespace
}  // namespace sluice
