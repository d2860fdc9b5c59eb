// End to end as Envoy Gateway runs its rate limit service: the real build/bin/sluice started
// with no flags and the environment Envoy Gateway's controller gives the container
// (envoyproxy/gateway internal/infrastructure/kubernetes/ratelimit/resource.go): config over
// xDS from a management server with mutual TLS, TLS on the gRPC port, Redis over TCP, and
// FORCE_START_WITHOUT_INITIAL_CONFIG. The management server is the test's own
// (tests/support/fake_ads_server.h); the resources it pushes have the shape of Envoy Gateway's
// translator outputs (a domain per listener, a descriptor per route with a generic key, a
// rule per match below it), and the requests are built as its route actions build them.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/certificates.h"
#include "tests/support/fake_ads_server.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

namespace rls = ::ratelimit::config::ratelimit::v3;
using testing::ChildProcess;
using testing::FakeAdsServer;
using testing::FreePort;
using testing::HttpGet;
using testing::ReadWholeFile;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;
using ::testing::HasSubstr;
using Received = FakeAdsServer::Received;

constexpr absl::Duration kWait = absl::Seconds(20);

// Envoy Gateway's shape for a listener "first-listener" with a route "first-route" whose rule
// limits each x-user-id to `per_month` requests a month.
rls::RateLimitConfig GatewayConfig(uint32_t per_month) {
  rls::RateLimitConfig config;
  config.set_name("first-listener");
  config.set_domain("first-listener");
  rls::RateLimitDescriptor* route = config.add_descriptors();
  route->set_key("first-route");
  route->set_value("first-route");
  rls::RateLimitDescriptor* match = route->add_descriptors();
  match->set_key("rule-0-match-0");
  match->mutable_rate_limit()->set_unit(rls::MONTH);
  match->mutable_rate_limit()->set_requests_per_unit(per_month);
  return config;
}

// Envoy Gateway's shape for a shared policy in shadow mode: a domain named after the policy
// ("namespace/name"), one descriptor level per match of the rule, the client's address masked
// to /0 at the bottom, and shadow_mode on every level; 1 request a minute (a second's window
// could close between the test's three calls on a loaded machine, and count one over, not two).
rls::RateLimitConfig SharedShadowPolicy() {
  rls::RateLimitConfig config;
  config.set_name("test-namespace/test-policy-1");
  config.set_domain("test-namespace/test-policy-1");
  rls::RateLimitDescriptor* level = config.add_descriptors();
  level->set_key("test-namespace/test-policy-1/rule/0");
  level->set_value("test-namespace/test-policy-1/rule/0");
  level->set_shadow_mode(true);
  for (const char* match : {"rule-0-match-0", "rule-0-match-1", "masked_remote_address"}) {
    level = level->add_descriptors();
    level->set_key(match);
    level->set_value(std::string(match) == "masked_remote_address" ? "0.0.0.0/0" : match);
    level->set_shadow_mode(true);
  }
  level->mutable_rate_limit()->set_unit(rls::MINUTE);
  level->mutable_rate_limit()->set_requests_per_unit(1);
  return config;
}

class XdsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* ca : {"ca", "xds-ca"}) {
      ASSERT_TRUE(testing::MakeCa(dir_.path(), ca).ok());
    }
    for (auto [name, ca] : {std::pair{"sluice", "ca"}, std::pair{"xds-server", "xds-ca"},
                            std::pair{"xds-client", "xds-ca"}}) {
      absl::Status made = testing::MakeCert(dir_.path(), name, ca);
      ASSERT_TRUE(made.ok()) << made;
    }
  }

  std::string File(const std::string& name) { return absl::StrCat(dir_.path(), "/", name); }

  // The management server, requiring a client certificate of xds-ca.
  void StartXds(int port = 0) {
    grpc::SslServerCredentialsOptions options(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    options.pem_key_cert_pairs.push_back(
        {ReadWholeFile(File("xds-server.key")), ReadWholeFile(File("xds-server.crt"))});
    options.pem_root_certs = ReadWholeFile(File("xds-ca.crt"));
    auto started = FakeAdsServer::Start(port, grpc::SslServerCredentials(options));
    ASSERT_TRUE(started.ok()) << started.status();
    xds_ = *std::move(started);
    xds_address_ = xds_->address();
  }

  // Envoy Gateway's environment, with loopback ports, and `extra` after it.
  std::vector<std::string> GatewayEnvironment(const std::string& redis_address,
                                              bool force_start) {
    grpc_port_ = FreePort();
    http_port_ = FreePort();
    prometheus_port_ = FreePort();
    return {
        "RUNTIME_ROOT=/data",
        "RUNTIME_SUBDIRECTORY=ratelimit",
        "RUNTIME_IGNOREDOTFILES=true",
        "RUNTIME_WATCH_ROOT=false",
        "LOG_LEVEL=info",
        "USE_STATSD=false",
        "CONFIG_TYPE=GRPC_XDS_SOTW",
        absl::StrCat("CONFIG_GRPC_XDS_SERVER_URL=", xds_address_),
        "CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
        "GRPC_SERVER_USE_TLS=true",
        absl::StrCat("GRPC_SERVER_TLS_CERT=", File("sluice.crt")),
        absl::StrCat("GRPC_SERVER_TLS_KEY=", File("sluice.key")),
        absl::StrCat("GRPC_SERVER_TLS_CA_CERT=", File("ca.crt")),
        "CONFIG_GRPC_XDS_SERVER_USE_TLS=true",
        absl::StrCat("CONFIG_GRPC_XDS_CLIENT_TLS_CERT=", File("xds-client.crt")),
        absl::StrCat("CONFIG_GRPC_XDS_CLIENT_TLS_KEY=", File("xds-client.key")),
        absl::StrCat("CONFIG_GRPC_XDS_SERVER_TLS_CACERT=", File("xds-ca.crt")),
        absl::StrCat("FORCE_START_WITHOUT_INITIAL_CONFIG=", force_start ? "true" : "false"),
        "REDIS_SOCKET_TYPE=tcp",
        absl::StrCat("REDIS_URL=", redis_address),
        "USE_PROMETHEUS=true",
        // Not Envoy Gateway's: loopback ports for the test (its PROMETHEUS_ADDR is ":19001"),
        // the built-in mapping (its PROMETHEUS_MAPPER_YAML file maps the rate limit series the
        // same way), and a reconnection wait shorter than the default 10 s so that the restart
        // below takes a moment.
        absl::StrCat("PROMETHEUS_ADDR=127.0.0.1:", prometheus_port_),
        "HOST=127.0.0.1",
        absl::StrCat("PORT=", http_port_),
        "GRPC_HOST=127.0.0.1",
        absl::StrCat("GRPC_PORT=", grpc_port_),
        "DEBUG_HOST=127.0.0.1",
        absl::StrCat("DEBUG_PORT=", FreePort()),
        "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=200ms",
    };
  }

  void StartSluice(std::vector<std::string> env) {
    sluice_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{SluiceServer::BinaryPath("sluice")},
        absl::StrCat(dir_.path(), "/sluice.log"), std::move(env));
  }

  // A decision for user `user` as Envoy Gateway's route actions build the request (a generic
  // key for the route, the x-user-id header's value under the match's key), over TLS.
  absl::StatusOr<RlsResponse> Check(const std::string& user) {
    return Call("first-listener", absl::StrCat("first-route=first-route,rule-0-match-0=", user));
  }

  // One descriptor in `domain`, over TLS.
  absl::StatusOr<RlsResponse> Call(const std::string& domain, const std::string& descriptor) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadWholeFile(File("ca.crt"));
    RlsClient client(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port_),
                                         grpc::SslCredentials(options)));
    absl::StatusOr<RlsRequest> request = BuildRequest(domain, {descriptor}, 0);
    if (!request.ok()) {
      return request.status();
    }
    return client.ShouldRateLimit(*request, absl::Seconds(5));
  }

  // The limit the config in force gives a fresh user, polled until it is `limit`.
  bool WaitForLimit(uint32_t limit) {
    for (int i = 0; i < 200; ++i) {
      absl::StatusOr<RlsResponse> r = Check(absl::StrCat("probe-", limit, "-", i));
      if (r.ok() && r->statuses_size() == 1 &&
          r->statuses(0).current_limit().requests_per_unit() == limit) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

  std::optional<std::pair<size_t, Received>> Answer(size_t from, const std::string& nonce) {
    return xds_->WaitFor(
        from, [&](const Received& r) { return r.request.response_nonce() == nonce; }, kWait);
  }

  TempDir dir_;
  std::unique_ptr<FakeAdsServer> xds_;
  std::string xds_address_;  // the management server's HOST:PORT
  std::unique_ptr<ChildProcess> sluice_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  int prometheus_port_ = 0;
};

// Verifies Envoy Gateway's environment works unchanged: Sluice starts before any config
// (FORCE_START), takes the management server's snapshot over mutual TLS, decides on Redis over
// TLS gRPC, follows an update, NACKs a bad snapshot while the last good one keeps deciding,
// and comes back after the management server restarts.
TEST_F(XdsE2eTest, EnvoyGatewaysEnvironmentUnchanged) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  StartXds();
  const int xds_port = xds_->port();
  StartSluice(GatewayEnvironment((*redis)->address(), /*force_start=*/true));
  ASSERT_TRUE(WaitForPort(grpc_port_, std::chrono::seconds(20))) << sluice_->ReadLog();
  ASSERT_TRUE(WaitForPort(http_port_, std::chrono::seconds(20))) << sluice_->ReadLog();
  // Envoy Gateway's probes.
  EXPECT_EQ(HttpGet(http_port_, "/healthcheck"), "OK\n200");

  // The subscription: node and type as upstream sends them.
  auto hello = xds_->WaitFor(0, [](const Received&) { return true; }, kWait);
  ASSERT_TRUE(hello.has_value()) << sluice_->ReadLog();
  EXPECT_EQ(hello->second.request.node().id(), "envoy-ratelimit");
  EXPECT_EQ(hello->second.request.type_url(),
            "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig");

  // Before any config a call is refused, not guessed at.
  absl::StatusOr<RlsResponse> early = Check("alice");
  EXPECT_FALSE(early.ok());

  ASSERT_TRUE(Answer(0, xds_->Push("1", {GatewayConfig(3), SharedShadowPolicy()})).has_value())
      << sluice_->ReadLog();
  ASSERT_TRUE(WaitForLimit(3)) << sluice_->ReadLog();
  // The shared policy in shadow mode: over its limit of 1, still OK, as the header matches and
  // the masked address build the request.
  const std::string shadowed =
      "test-namespace/test-policy-1/rule/0=test-namespace/test-policy-1/rule/0,"
      "rule-0-match-0=rule-0-match-0,rule-0-match-1=rule-0-match-1,"
      "masked_remote_address=0.0.0.0/0";
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RlsResponse> r = Call("test-namespace/test-policy-1", shadowed);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->overall_code(), RlsResponse::OK) << i;
    ASSERT_EQ(r->statuses_size(), 1);
    EXPECT_EQ(r->statuses(0).current_limit().requests_per_unit(), 1u);
  }
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RlsResponse> r = Check("alice");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->overall_code(), RlsResponse::OK) << i;
  }
  absl::StatusOr<RlsResponse> over = Check("alice");
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_EQ(over->overall_code(), RlsResponse::OVER_LIMIT);
  // The counts are in Redis, under upstream's key shape and Sluice's prefix.
  auto keys = (*redis)->Command({"KEYS", "*first-listener*"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, HasSubstr("alice"));

  // An update.
  ASSERT_TRUE(Answer(0, xds_->Push("2", {GatewayConfig(7)})).has_value());
  EXPECT_TRUE(WaitForLimit(7));

  // A bad snapshot: NACKed with the version in force; that version keeps deciding.
  rls::RateLimitConfig bad = GatewayConfig(1);
  bad.mutable_descriptors(0)->mutable_descriptors(0)->mutable_rate_limit()->set_unit(rls::UNKNOWN);
  auto nack = Answer(0, xds_->Push("3", {bad}));
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->second.request.version_info(), "2");
  EXPECT_THAT(nack->second.request.error_detail().message(),
              HasSubstr("xds:first-listener: descriptors[0].descriptors[0].rate_limit"));
  absl::StatusOr<RlsResponse> still = Check("bob");
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->statuses(0).current_limit().requests_per_unit(), 7u);

  // The management server restarts (a controller rollout): Sluice keeps deciding meanwhile,
  // then takes the new server's snapshot.
  xds_->Stop();
  absl::StatusOr<RlsResponse> during = Check("carol");
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->overall_code(), RlsResponse::OK);
  StartXds(xds_port);
  ASSERT_TRUE(Answer(0, xds_->Push("4", {GatewayConfig(9)})).has_value()) << sluice_->ReadLog();
  EXPECT_TRUE(WaitForLimit(9));
  EXPECT_THAT(HttpGet(http_port_, "/metrics"),
              ::testing::AllOf(HasSubstr("sluice_xds_connected 1"),
                               HasSubstr("sluice_xds_snapshots_total{result=\"rejected\"} 1")));
  // Upstream's series on PROMETHEUS_ADDR, as Envoy Gateway's dashboard queries them: the
  // route's rule, its hits and the one denial above.
  const std::string scrape = HttpGet(prometheus_port_, "/metrics");
  const std::string labels =
      "{domain=\"first-listener\",key1=\"first-route_first-route\",key2=\"rule-0-match-0\"}";
  EXPECT_THAT(scrape, HasSubstr("ratelimit_service_rate_limit_over_limit" + labels + " 1"))
      << scrape;
  EXPECT_THAT(scrape, HasSubstr("ratelimit_service_rate_limit_total_hits" + labels));
  // The shadowed policy's series: its deeper names go through the regex rules (domain, key1,
  // key2), and two of its three hits were over the limit.
  const size_t shadow = scrape.find(
      "ratelimit_service_rate_limit_shadow_mode{domain=\"test-namespace/test-policy-1\"");
  ASSERT_NE(shadow, std::string::npos) << scrape;
  const std::string shadow_line = scrape.substr(shadow, scrape.find('\n', shadow) - shadow);
  EXPECT_TRUE(absl::EndsWith(shadow_line, "} 2")) << shadow_line;
  EXPECT_THAT(scrape, HasSubstr("ratelimit_service_config_load_success"));
  EXPECT_THAT(scrape, HasSubstr("\nprocess_resident_memory_bytes "));
  EXPECT_EQ(sluice_->Stop(SIGTERM, std::chrono::seconds(10)), 0);
}

// Verifies that without FORCE_START_WITHOUT_INITIAL_CONFIG nothing is served until the first
// snapshot (as upstream), and that SIGTERM while waiting stops the process cleanly.
TEST_F(XdsE2eTest, WithoutForceStartServesOnlyOnceConfigured) {
  StartXds();
  StartSluice(GatewayEnvironment("127.0.0.1:1", /*force_start=*/false));
  ASSERT_TRUE(xds_->WaitFor(0, [](const Received&) { return true; }, kWait).has_value())
      << sluice_->ReadLog();
  EXPECT_FALSE(WaitForPort(grpc_port_, std::chrono::milliseconds(500)));
  xds_->Push("1", {GatewayConfig(3)});
  EXPECT_TRUE(WaitForPort(grpc_port_, std::chrono::seconds(20))) << sluice_->ReadLog();
  EXPECT_EQ(sluice_->Stop(SIGTERM, std::chrono::seconds(10)), 0);

  // A second one that never gets a config stops on SIGTERM.
  xds_->SetSilent(true);
  StartSluice(GatewayEnvironment("127.0.0.1:1", /*force_start=*/false));
  ASSERT_TRUE(xds_->WaitFor(1, [](const Received& r) { return r.stream >= 2; }, kWait)
                  .has_value());
  EXPECT_EQ(sluice_->Stop(SIGTERM, std::chrono::seconds(10)), 0);
  EXPECT_THAT(sluice_->ReadLog(), HasSubstr("before the first config: stopping"));
}

// Verifies sluice-fake-ads, the management server scripts/check-image runs beside the container
// image, serves the snapshot file it is given over mutual TLS: Sluice in Envoy Gateway's
// environment ACKs it and decides with its limit.
TEST_F(XdsE2eTest, FakeAdsToolServesItsSnapshotFile) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(GatewayConfig(5), &text));
  const std::string snapshot = dir_.WriteFile("snapshot.txtpb", text);
  const int port = FreePort();
  ChildProcess tool({SluiceServer::BinaryPath("sluice-fake-ads"), absl::StrCat("--port=", port),
                     "--snapshot=" + snapshot, "--version=v7",
                     "--tls_cert=" + File("xds-server.crt"), "--tls_key=" + File("xds-server.key"),
                     "--tls_client_ca=" + File("xds-ca.crt")},
                    File("fake-ads.log"));
  ASSERT_TRUE(WaitForPort(port, std::chrono::seconds(20))) << tool.ReadLog();
  xds_address_ = absl::StrCat("127.0.0.1:", port);
  StartSluice(GatewayEnvironment((*redis)->address(), /*force_start=*/true));
  EXPECT_TRUE(WaitForLimit(5)) << sluice_->ReadLog() << tool.ReadLog();
  EXPECT_THAT(tool.ReadLog(), HasSubstr("node envoy-ratelimit, holds version \"v7\""));
  EXPECT_EQ(sluice_->Stop(SIGTERM, std::chrono::seconds(10)), 0);
  EXPECT_EQ(tool.Stop(SIGTERM, std::chrono::seconds(10)), 0);

  // A snapshot file that is not a RateLimitConfig is refused by name.
  auto [code, output] = testing::RunCommand(absl::StrCat(
      SluiceServer::BinaryPath("sluice-fake-ads"), " --port=0 --snapshot=",
      dir_.WriteFile("bad.txtpb", "domain: [\n"), " 2>&1"));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("bad.txtpb: not a RateLimitConfig in protobuf text format"));
}

}  // namespace
}  // namespace sluice
