// End-to-end: envoyproxy/ratelimit's Prometheus surface on the real build/bin/sluice, started
// the way Envoy Gateway starts upstream (USE_PROMETHEUS=true, PROMETHEUS_ADDR,
// PROMETHEUS_MAPPER_YAML with its statsd_exporter mapping), scraped after real decisions; and a
// mapping file it cannot honour stopping the start by file, line and field.
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ChildProcess;
using testing::FreePort;
using testing::HttpGet;
using testing::RunCommand;
using testing::SluiceServer;
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

// A mapping in the shape of Envoy Gateway's statsd_conf.yaml: per-rule counters with one key
// by glob and with two keys by regex, errors, requests, response times (no scale: upstream
// then serves milliseconds) and config loads.
std::string GatewayLikeMapping() {
  std::string yaml = "mappings:\n";
  const char* counters[] = {"near_limit", "over_limit", "total_hits", "within_limit",
                            "shadow_mode"};
  for (const char* counter : counters) {
    absl::StrAppend(&yaml, "  - match: \"ratelimit.service.rate_limit.*.*.", counter, "\"\n",
                    "    name: \"ratelimit_service_rate_limit_", counter, "\"\n",
                    "    timer_type: \"histogram\"\n    labels:\n      domain: \"$1\"\n",
                    "      key1: \"$2\"\n");
  }
  for (const char* counter : counters) {
    absl::StrAppend(&yaml,
                    "  - match: \"ratelimit\\\\.service\\\\.rate_limit\\\\.([^\\\\.]*)\\\\."
                    "([^\\\\.]*)\\\\.([^\\\\.]*)(\\\\..*)?\\\\.",
                    counter, "\"\n    match_type: regex\n",
                    "    name: \"ratelimit_service_rate_limit_", counter, "\"\n",
                    "    timer_type: \"histogram\"\n    labels:\n      domain: \"$1\"\n",
                    "      key1: \"$2\"\n      key2: \"$3\"\n");
  }
  absl::StrAppend(&yaml,
                  "  - match: \"ratelimit.service.call.should_rate_limit.*\"\n"
                  "    name: \"ratelimit_service_should_rate_limit_error\"\n"
                  "    match_metric_type: counter\n"
                  "    labels:\n      err_type: \"$1\"\n"
                  "  - match: \"ratelimit_server.*.total_requests\"\n"
                  "    name: \"ratelimit_service_total_requests\"\n"
                  "    match_metric_type: counter\n"
                  "    labels:\n      grpc_method: \"$1\"\n"
                  "  - match: \"ratelimit_server.*.response_time\"\n"
                  "    name: \"ratelimit_service_response_time_seconds\"\n"
                  "    timer_type: histogram\n"
                  "    labels:\n      grpc_method: \"$1\"\n"
                  "  - match: \"ratelimit.service.config_load_success\"\n"
                  "    name: \"ratelimit_service_config_load_success\"\n"
                  "    match_metric_type: counter\n");
  return yaml;
}

// The value of the sample `series` (name and labels, as printed) in a scrape, or -1.
double Sample(const std::string& page, const std::string& series) {
  const std::string line_start = series + " ";
  size_t at = page.find("\n" + line_start);
  if (at == std::string::npos) {
    return -1;
  }
  at += 1 + line_start.size();
  double value = -1;
  if (!absl::SimpleAtod(page.substr(at, page.find('\n', at) - at), &value)) {
    return -1;
  }
  return value;
}

class PrometheusE2eTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

// Verifies a scrape of PROMETHEUS_ADDR after decisions finds upstream's series with the values
// Sluice's own counters hold, under the labels Envoy Gateway's dashboard queries, plus the
// request count and the response-time histogram; Sluice's own /metrics is unchanged.
TEST_F(PrometheusE2eTest, ServesUpstreamNamesThroughAGatewayMapping) {
  const std::string config = dir_.WriteFile("config.yaml", kConfig);
  const std::string mapping = dir_.WriteFile("conf.yaml", GatewayLikeMapping());
  const int grpc_port = FreePort();
  const int http_port = FreePort();
  const int prometheus_port = FreePort();
  ChildProcess sluice({SluiceServer::BinaryPath("sluice"), "--config=" + config,
                       absl::StrCat("--grpc_address=127.0.0.1:", grpc_port),
                       absl::StrCat("--http_address=127.0.0.1:", http_port)},
                      dir_.path() + "/sluice.log",
                      {"USE_PROMETHEUS=true",
                       absl::StrCat("PROMETHEUS_ADDR=127.0.0.1:", prometheus_port),
                       "PROMETHEUS_MAPPER_YAML=" + mapping,
                       // Upstream's WARN would hide the serving line checked below, and its
                       // default debug port is 0.0.0.0:6070: a loopback one.
                       "LOG_LEVEL=info", "DEBUG_HOST=127.0.0.1",
                       absl::StrCat("DEBUG_PORT=", FreePort())});
  ASSERT_TRUE(WaitForPort(prometheus_port, std::chrono::seconds(20))) << sluice.ReadLog();
  ASSERT_TRUE(WaitForPort(grpc_port, std::chrono::seconds(20))) << sluice.ReadLog();

  RlsClient client(absl::StrCat("127.0.0.1:", grpc_port));
  int calls = 0;
  auto check = [&](const std::string& descriptor) {
    auto request = BuildRequest("gw", {descriptor}, 0);
    ASSERT_TRUE(request.ok());
    auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
    ASSERT_TRUE(response.ok()) << response.status();
    ++calls;
  };
  for (int i = 0; i < 3; ++i) {
    check("user=alice");
  }
  for (int i = 0; i < 2; ++i) {
    check("route=a,user=bob");
  }

  const std::string page = HttpGet(prometheus_port, "/metrics");
  ASSERT_THAT(page, ::testing::EndsWith("\n200")) << page;
  const std::string one = "{domain=\"gw\",key1=\"user\"}";
  const std::string two = "{domain=\"gw\",key1=\"route_a\",key2=\"user\"}";
  EXPECT_EQ(Sample(page, "ratelimit_service_rate_limit_total_hits" + one), 3) << page;
  EXPECT_EQ(Sample(page, "ratelimit_service_rate_limit_within_limit" + one), 2);
  EXPECT_EQ(Sample(page, "ratelimit_service_rate_limit_over_limit" + one), 1);
  EXPECT_EQ(Sample(page, "ratelimit_service_rate_limit_total_hits" + two), 2);
  EXPECT_EQ(Sample(page, "ratelimit_service_rate_limit_over_limit" + two), 1);
  EXPECT_THAT(page, HasSubstr("# TYPE ratelimit_service_rate_limit_total_hits counter\n"));
  EXPECT_EQ(Sample(page, "ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"}"),
            calls);
  EXPECT_EQ(Sample(page, "ratelimit_service_response_time_seconds_count"
                         "{grpc_method=\"ShouldRateLimit\"}"),
            calls);
  EXPECT_EQ(Sample(page, "ratelimit_service_response_time_seconds_bucket"
                         "{grpc_method=\"ShouldRateLimit\",le=\"+Inf\"}"),
            calls);
  EXPECT_EQ(Sample(page, "ratelimit_service_config_load_success"), 1);

  // The near-limit count is Sluice's own, under upstream's name.
  const std::string own = HttpGet(http_port, "/metrics");
  EXPECT_GT(Sample(own, "sluice_rule_near_limit{key=\"gw.user\"}"), 0) << own;
  EXPECT_EQ(Sample(page, "ratelimit_service_rate_limit_near_limit" + one),
            Sample(own, "sluice_rule_near_limit{key=\"gw.user\"}"))
      << own;
  EXPECT_EQ(Sample(own, "sluice_rule_total_hits{key=\"gw.user\"}"), 3);
  EXPECT_THAT(own, Not(HasSubstr("ratelimit_service_")));
  EXPECT_THAT(HttpGet(prometheus_port, "/json"), ::testing::EndsWith("\n404"));
  EXPECT_THAT(sluice.ReadLog(), HasSubstr(absl::StrCat("Prometheus (upstream's names) on port ",
                                                       prometheus_port, "/metrics")));
}

// Verifies a mapping file using what Sluice does not implement stops the start with the file,
// line and field at fault, and no default mapping served in its place.
TEST_F(PrometheusE2eTest, RefusedMappingStopsTheStart) {
  const std::string config = dir_.WriteFile("config.yaml", kConfig);
  const std::string mapping = dir_.WriteFile(
      "conf.yaml", "mappings:\n  - match: \"a.*\"\n    name: \"a\"\n    ttl: 10m\n");
  auto [status, out] = RunCommand(absl::StrCat(
      "USE_PROMETHEUS=true PROMETHEUS_ADDR=127.0.0.1:", FreePort(),
      " PROMETHEUS_MAPPER_YAML=", mapping, " ", SluiceServer::BinaryPath("sluice"),
      " --config=", config, " --grpc_address=127.0.0.1:", FreePort(),
      " --http_address=127.0.0.1:", FreePort()));
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("sluice: --prometheus_mapper: ", mapping,
                                          ":4: mappings[0].ttl: not supported")))
      << out;
}

}  // namespace
}  // namespace sluice
