// End-to-end: envoyproxy/ratelimit's statsd sinks on the real build/bin/sluice, started with
// upstream's variables only and STATSD_HOST/STATSD_PORT pointing at a statsd the test binds on
// loopback: plain statsd over TCP (upstream's default, USE_STATSD unset) and over UDP, and
// DogStatsD with EXTRA_TAGS, a DD_* tag and a mogrifier. Each compares what arrives with the
// names and counts upstream sends for the same requests (base_limiter.go's arithmetic).
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"
#include "tests/support/statsd_listener.h"

namespace sluice {
namespace {

using ::testing::Each;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::FreePort;
using testing::SluiceServer;
using testing::StatsdListener;
using testing::TempDir;
using testing::WaitForPort;

constexpr char kConfig[] = R"(domain: gw
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: route
    value: a
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 1}
)";

using Sums = std::map<std::string, uint64_t>;

// What upstream counts for three calls of user=alice (limit 2) and two of route=a,user=bob
// (limit 1), increment first: the second alice call and the first bob call are past
// floor(0.8 * limit), the last call of each is over.
Sums UpstreamCounts() {
  return {
      {"ratelimit.service.rate_limit.gw.user.total_hits", 3},
      {"ratelimit.service.rate_limit.gw.user.within_limit", 2},
      {"ratelimit.service.rate_limit.gw.user.near_limit", 1},
      {"ratelimit.service.rate_limit.gw.user.over_limit", 1},
      {"ratelimit.service.rate_limit.gw.route_a.user.total_hits", 2},
      {"ratelimit.service.rate_limit.gw.route_a.user.within_limit", 1},
      {"ratelimit.service.rate_limit.gw.route_a.user.near_limit", 1},
      {"ratelimit.service.rate_limit.gw.route_a.user.over_limit", 1},
      {"ratelimit.service.config_load_success", 1},
      {"ratelimit_server.ShouldRateLimit.total_requests", 5},
  };
}

// DogStatsD counter lines ("name:3|c|#a:b,c:d") summed by name and tags ("name|#a:b,c:d").
Sums SumDogCounters(const std::vector<std::string>& lines) {
  Sums sums;
  for (const std::string& line : lines) {
    const size_t colon = line.find(':');
    const size_t bar = line.find("|c", colon);
    uint64_t value = 0;
    if (colon == std::string::npos || bar == std::string::npos ||
        !absl::SimpleAtoi(line.substr(colon + 1, bar - colon - 1), &value)) {
      continue;
    }
    sums[line.substr(0, colon) + line.substr(bar + 2)] += value;
  }
  return sums;
}

// The observations the timer lines of `name` stand for ("name:0|ms", "name:3|ms|@<rate>").
double TimerObservations(const std::vector<std::string>& lines, const std::string& name) {
  double count = 0;
  for (const std::string& line : lines) {
    if (!absl::StartsWith(line, name + ":") || !absl::StrContains(line, "|ms")) {
      continue;
    }
    double rate = 1;
    const size_t at = line.find("|@");
    if (at != std::string::npos) {
      EXPECT_TRUE(absl::SimpleAtod(line.substr(at + 2, line.find('|', at + 2) - at - 2), &rate))
          << line;
    }
    count += 1 / rate;
  }
  return count;
}

class StatsdE2eTest : public ::testing::Test {
 protected:
  // Starts sluice with no flags: upstream's variables, the config as a runtime directory, and
  // `extra` (the stats variables).
  void Start(const std::vector<std::string>& extra) {
    dir_.WriteFile("runtime/ratelimit/config/config.yaml", kConfig);
    grpc_port_ = FreePort();
    std::vector<std::string> env = {
        absl::StrCat("RUNTIME_ROOT=", dir_.path(), "/runtime"),
        "RUNTIME_SUBDIRECTORY=ratelimit",
        "HOST=127.0.0.1",
        absl::StrCat("PORT=", FreePort()),
        "GRPC_HOST=127.0.0.1",
        absl::StrCat("GRPC_PORT=", grpc_port_),
        "DEBUG_HOST=127.0.0.1",
        absl::StrCat("DEBUG_PORT=", FreePort()),
        "LOG_LEVEL=info",
        "STATS_FLUSH_INTERVAL=200ms",
    };
    env.insert(env.end(), extra.begin(), extra.end());
    server_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{SluiceServer::BinaryPath("sluice")},
        absl::StrCat(dir_.path(), "/sluice.log"), env);
    ASSERT_TRUE(WaitForPort(grpc_port_, std::chrono::seconds(20))) << server_->ReadLog();
  }

  // Three calls for user=alice, two for route=a,user=bob.
  void Decide() {
    RlsClient client(absl::StrCat("127.0.0.1:", grpc_port_));
    for (const char* descriptor :
         {"user=alice", "user=alice", "user=alice", "route=a,user=bob", "route=a,user=bob"}) {
      auto request = BuildRequest("gw", {descriptor}, 0);
      ASSERT_TRUE(request.ok());
      auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
      ASSERT_TRUE(response.ok()) << response.status();
    }
  }

  TempDir dir_;
  int grpc_port_ = 0;
  std::unique_ptr<ChildProcess> server_;
};

// Verifies a swap from upstream keeps its statsd: with USE_STATSD unset (upstream's default,
// true) and STATSD_HOST/STATSD_PORT at a statsd that listens over TCP (gostats' default), the
// counts arrive under upstream's names with upstream's values, each sent once however many
// flushes pass, and the calls' response times as timer lines.
TEST_F(StatsdE2eTest, UpstreamDefaultSendsStatsdOverTcp) {
  StatsdListener statsd(StatsdListener::Protocol::kTcp);
  Start({"STATSD_HOST=127.0.0.1", absl::StrCat("STATSD_PORT=", statsd.port())});
  Decide();
  const Sums expected = UpstreamCounts();
  // The timer lines of a flush may come in a later datagram or write than its counters.
  std::vector<std::string> lines = statsd.WaitFor(
      [&](const std::vector<std::string>& l) {
        return StatsdListener::SumCounters(l) == expected &&
               TimerObservations(l, "ratelimit_server.ShouldRateLimit.response_time") >= 5;
      },
      std::chrono::seconds(20));
  EXPECT_EQ(StatsdListener::SumCounters(lines), expected) << server_->ReadLog();
  // Several flushes later, nothing was counted twice.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  lines = statsd.Lines();
  EXPECT_EQ(StatsdListener::SumCounters(lines), expected);
  EXPECT_EQ(TimerObservations(lines, "ratelimit_server.ShouldRateLimit.response_time"), 5);
  EXPECT_THAT(lines, ::testing::Contains("ratelimit.service.rate_limit.gw.user.total_hits:3|c"));
  EXPECT_THAT(server_->ReadLog(),
              HasSubstr(absl::StrCat("statsd: envoyproxy/ratelimit's names to 127.0.0.1:",
                                     statsd.port(), " over tcp every 200ms")));
}

// Verifies STATSD_PROTOCOL=udp: the same lines in datagrams of whole lines within 1432 bytes.
TEST_F(StatsdE2eTest, UpstreamStatsdOverUdp) {
  StatsdListener statsd(StatsdListener::Protocol::kUdp);
  Start({"USE_STATSD=true", "STATSD_HOST=127.0.0.1", absl::StrCat("STATSD_PORT=", statsd.port()),
         "STATSD_PROTOCOL=udp"});
  Decide();
  const Sums expected = UpstreamCounts();
  std::vector<std::string> lines = statsd.WaitFor(
      [&](const std::vector<std::string>& l) { return StatsdListener::SumCounters(l) == expected; },
      std::chrono::seconds(20));
  EXPECT_EQ(StatsdListener::SumCounters(lines), expected) << server_->ReadLog();
  const std::vector<std::string> datagrams = statsd.Datagrams();
  EXPECT_THAT(datagrams, Each(EndsWith("\n")));
  for (const std::string& datagram : datagrams) {
    EXPECT_LE(datagram.size(), 1432u);
  }
}

// Verifies USE_DOG_STATSD: DogStatsD lines over UDP with datagrams within 1432 bytes, the DD_ENV
// tag first, EXTRA_TAGS as tags (sorted by key, '.' in a value made '_', as gostats then
// godogstats do), and a mogrifier from upstream's README turning the per-rule names into one
// name per counter tagged with the domain and the descriptor.
TEST_F(StatsdE2eTest, DogStatsdWithExtraTagsAndMogrifier) {
  StatsdListener statsd(StatsdListener::Protocol::kUdp);
  Start({"USE_STATSD=false", "USE_DOG_STATSD=true", "STATSD_HOST=127.0.0.1",
         absl::StrCat("STATSD_PORT=", statsd.port()), "DD_ENV=test",
         "EXTRA_TAGS=version:1.2,cluster:eu-1", "USE_DOG_STATSD_MOGRIFIERS=HITS",
         R"(DOG_STATSD_MOGRIFIER_HITS_PATTERN=^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$)",
         "DOG_STATSD_MOGRIFIER_HITS_NAME=ratelimit.service.rate_limit.$3",
         "DOG_STATSD_MOGRIFIER_HITS_TAGS=domain:$1,descriptor:$2"});
  Decide();
  const std::string tags = "|#env:test,cluster:eu-1,version:1_2";
  const Sums expected = {
      {"ratelimit.service.rate_limit.total_hits" + tags + ",domain:gw,descriptor:user", 3},
      {"ratelimit.service.rate_limit.within_limit" + tags + ",domain:gw,descriptor:user", 2},
      {"ratelimit.service.rate_limit.near_limit" + tags + ",domain:gw,descriptor:user", 1},
      {"ratelimit.service.rate_limit.over_limit" + tags + ",domain:gw,descriptor:user", 1},
      {"ratelimit.service.rate_limit.total_hits" + tags + ",domain:gw,descriptor:route_a.user",
       2},
      {"ratelimit.service.rate_limit.within_limit" + tags +
           ",domain:gw,descriptor:route_a.user",
       1},
      {"ratelimit.service.rate_limit.near_limit" + tags + ",domain:gw,descriptor:route_a.user",
       1},
      {"ratelimit.service.rate_limit.over_limit" + tags + ",domain:gw,descriptor:route_a.user",
       1},
      {"ratelimit.service.config_load_success" + tags, 1},
      {"ratelimit_server.ShouldRateLimit.total_requests" + tags, 5},
  };
  std::vector<std::string> lines = statsd.WaitFor(
      [&](const std::vector<std::string>& l) {
        return SumDogCounters(l) == expected &&
               TimerObservations(l, "ratelimit_server.ShouldRateLimit.response_time") >= 5;
      },
      std::chrono::seconds(20));
  EXPECT_EQ(SumDogCounters(lines), expected) << server_->ReadLog();
  EXPECT_EQ(TimerObservations(lines, "ratelimit_server.ShouldRateLimit.response_time"), 5);
  for (const std::string& line : lines) {
    EXPECT_THAT(line, HasSubstr(tags)) << line;
  }
  for (const std::string& datagram : statsd.Datagrams()) {
    EXPECT_LE(datagram.size(), 1432u);
  }
}

// Verifies a native run (no upstream variable) sends statsd when --statsd_address asks: the
// same names, over UDP by default, with --statsd_extra_tags in them.
TEST_F(StatsdE2eTest, NativeFlags) {
  StatsdListener statsd(StatsdListener::Protocol::kUdp);
  const std::string config = dir_.WriteFile("config.yaml", kConfig);
  grpc_port_ = FreePort();
  server_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{SluiceServer::BinaryPath("sluice"), "--config=" + config,
                               absl::StrCat("--grpc_address=127.0.0.1:", grpc_port_),
                               absl::StrCat("--http_address=127.0.0.1:", FreePort()),
                               "--statsd_address=" + statsd.address(),
                               "--statsd_flush_interval=100ms",
                               "--statsd_extra_tags=team:edge"},
      absl::StrCat(dir_.path(), "/sluice.log"));
  ASSERT_TRUE(WaitForPort(grpc_port_, std::chrono::seconds(20))) << server_->ReadLog();
  Decide();
  std::vector<std::string> lines = statsd.WaitFor(
      [](const std::vector<std::string>& l) {
        return StatsdListener::SumCounters(l)
                   ["ratelimit_server.ShouldRateLimit.total_requests.__team=edge"] == 5;
      },
      std::chrono::seconds(20));
  Sums sums = StatsdListener::SumCounters(lines);
  EXPECT_EQ(sums["ratelimit_server.ShouldRateLimit.total_requests.__team=edge"], 5);
  EXPECT_EQ(sums["ratelimit.service.rate_limit.gw.user.total_hits.__team=edge"], 3);
  // Sluice's own charging (a denial consumes nothing): the over-limit call is counted the same.
  EXPECT_EQ(sums["ratelimit.service.rate_limit.gw.user.over_limit.__team=edge"], 1);
}

}  // namespace
}  // namespace sluice
