#include "server/xds/xds_config_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/certificates.h"
#include "tests/support/fake_ads_server.h"
#include "tests/support/fake_clock.h"
#include "tests/support/process.h"
#include "tests/support/stderr_capture.h"

namespace sluice {
namespace {

namespace rls = ::ratelimit::config::ratelimit::v3;
using testing::Domain;
using testing::FakeAdsServer;
using testing::TempDir;
using ::testing::HasSubstr;

using Received = FakeAdsServer::Received;

constexpr absl::Duration kWait = absl::Seconds(10);

using testing::StderrCapture;

// The lines of `log` that contain `part`.
std::vector<std::string> LinesWith(const std::string& log, absl::string_view part) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    if (absl::StrContains(line, part)) {
      lines.emplace_back(line);
    }
  }
  return lines;
}

// Settings that retry at once: the tests wait for outcomes, not for timers.
XdsSettings FastSettings(const std::string& server) {
  XdsSettings settings;
  settings.server = server;
  settings.node_id = "envoy-ratelimit";
  settings.node_metadata = {{"zone", "a"}};
  settings.headers = {{"X-Tenant", "blue"}};
  settings.connect_retry_interval = absl::Milliseconds(50);
  settings.backoff_initial = absl::Milliseconds(50);
  settings.backoff_max = absl::Milliseconds(200);
  return settings;
}

class XdsConfigClientTest : public ::testing::Test {
 protected:
  void StartServer(int port = 0, std::shared_ptr<grpc::ServerCredentials> credentials = nullptr) {
    auto started = FakeAdsServer::Start(port, std::move(credentials));
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  void StartClient(XdsSettings settings) {
    client_ = std::make_unique<XdsConfigClient>(
        std::move(settings), ValidateOptions{}, store_,
        [this](const Config* accepted, const std::string& version, const absl::Status& rejected) {
          MutexLock lock(mu_);
          outcomes_.push_back(accepted != nullptr ? absl::StrCat("accepted ", version)
                                                  : absl::StrCat("rejected ", version, ": ",
                                                                 rejected.message()));
        },
        [this](bool connected) {
          MutexLock lock(mu_);
          connections_.push_back(connected);
        },
        clock_);
    client_->Start();
  }

  // The first request at index `from` or later that ACKs or NACKs the response `nonce`.
  std::optional<std::pair<size_t, Received>> Answer(size_t from, const std::string& nonce) {
    return server_->WaitFor(
        from, [&](const Received& r) { return r.request.response_nonce() == nonce; }, kWait);
  }

  bool HasDomain(const std::string& domain) {
    std::shared_ptr<const Config> config = store_.Get();
    return config != nullptr && config->HasDomain(domain);
  }

  std::vector<std::string> outcomes() {
    MutexLock lock(mu_);
    return outcomes_;
  }

  TempDir dir_;
  // Paces the client's log only; stands still unless a test moves it.
  FakeClock clock_;
  ConfigStore store_{nullptr};
  std::unique_ptr<FakeAdsServer> server_;
  std::unique_ptr<XdsConfigClient> client_;
  Mutex mu_;
  std::vector<std::string> outcomes_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> connections_ ABSL_GUARDED_BY(mu_);
};

// Verifies the subscription (node, metadata, headers, type), and that a valid snapshot is put
// in force and ACKed with its version and nonce.
TEST_F(XdsConfigClientTest, AcksAValidSnapshotAndPutsItInForce) {
  StartServer();
  StartClient(FastSettings(server_->address()));
  auto first = server_->WaitFor(0, [](const Received&) { return true; }, kWait);
  ASSERT_TRUE(first.has_value());
  const envoy::service::discovery::v3::DiscoveryRequest& subscribe = first->second.request;
  EXPECT_EQ(subscribe.type_url(),
            "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig");
  EXPECT_EQ(subscribe.version_info(), "");
  EXPECT_EQ(subscribe.response_nonce(), "");
  EXPECT_TRUE(subscribe.resource_names().empty()) << "every domain: a wildcard subscription";
  EXPECT_EQ(subscribe.node().id(), "envoy-ratelimit");
  EXPECT_EQ(subscribe.node().metadata().fields().at("zone").string_value(), "a");
  auto tenant = first->second.metadata.find("x-tenant");
  ASSERT_NE(tenant, first->second.metadata.end());
  EXPECT_EQ(tenant->second, "blue");
  EXPECT_FALSE(client_->WaitForConfig(absl::Milliseconds(50)));

  const std::string v1 = server_->Push("v1", {Domain("api", "client", "", 10), Domain("web", "ip", "", 5)});
  ASSERT_TRUE(client_->WaitForConfig(kWait));
  EXPECT_TRUE(HasDomain("api"));
  EXPECT_TRUE(HasDomain("web"));
  auto ack = Answer(0, v1);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->second.request.version_info(), "v1");
  EXPECT_FALSE(ack->second.request.has_error_detail());
  EXPECT_THAT(outcomes(), ::testing::ElementsAre("accepted v1"));
}

// Verifies an invalid snapshot is NACKed with what is wrong and the version still in force,
// which keeps deciding; a later valid one is put in force.
TEST_F(XdsConfigClientTest, NacksAnInvalidSnapshotAndKeepsTheConfigInForce) {
  StartServer();
  StartClient(FastSettings(server_->address()));
  const std::string v1 = server_->Push("v1", {Domain("api", "client", "", 10)});
  ASSERT_TRUE(client_->WaitForConfig(kWait));
  ASSERT_TRUE(Answer(0, v1).has_value());

  rls::RateLimitConfig bad = Domain("api", "client", "", 10);
  bad.mutable_descriptors(0)->mutable_rate_limit()->set_unit(rls::UNKNOWN);
  auto nack = Answer(0, server_->Push("v2", {Domain("web", "ip", "", 5), bad}));
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->second.request.version_info(), "v1");
  ASSERT_TRUE(nack->second.request.has_error_detail());
  EXPECT_EQ(nack->second.request.error_detail().code(), 3);
  EXPECT_THAT(nack->second.request.error_detail().message(),
              HasSubstr("xds:xds-api: descriptors[0].rate_limit"));
  EXPECT_TRUE(HasDomain("api"));
  EXPECT_FALSE(HasDomain("web")) << "a snapshot is taken whole or not at all";

  auto ack = Answer(nack->first + 1, server_->Push("v3", {Domain("web", "ip", "", 5)}));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->second.request.version_info(), "v3");
  EXPECT_TRUE(HasDomain("web"));
  EXPECT_FALSE(HasDomain("api"));
  std::vector<std::string> seen = outcomes();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], "accepted v1");
  EXPECT_THAT(seen[1], HasSubstr("rejected v2: xds:xds-api: descriptors[0].rate_limit"));
  EXPECT_EQ(seen[2], "accepted v3");
}

// Verifies the config in force outlives the management server, and that the client comes
// back when the server does (on a new stream announcing the version it has).
TEST_F(XdsConfigClientTest, KeepsTheConfigThroughAServerRestart) {
  StartServer();
  const int port = server_->port();
  StartClient(FastSettings(server_->address()));
  const std::string v1 = server_->Push("v1", {Domain("api", "client", "", 10)});
  ASSERT_TRUE(client_->WaitForConfig(kWait));
  ASSERT_TRUE(Answer(0, v1).has_value());

  server_->Stop();
  absl::SleepFor(absl::Milliseconds(300));  // several reconnection attempts fail meanwhile
  EXPECT_TRUE(HasDomain("api"));

  StartServer(port);
  auto hello = server_->WaitFor(0, [](const Received&) { return true; }, kWait);
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(hello->second.request.version_info(), "v1");
  ASSERT_TRUE(Answer(0, server_->Push("v2", {Domain("web", "ip", "", 5)})).has_value());
  EXPECT_TRUE(HasDomain("web"));
  MutexLock lock(mu_);
  EXPECT_THAT(connections_, ::testing::ElementsAre(true, false, true));
}

// Verifies a server that accepts the stream and never answers, or one not there at all, holds
// nothing up: the client waits, Stop is prompt, and config flows once the server answers.
TEST_F(XdsConfigClientTest, WaitsForAServerThatIsSilentOrAbsent) {
  const int port = testing::FreePort();
  StartClient(FastSettings(absl::StrCat("127.0.0.1:", port)));
  EXPECT_FALSE(client_->WaitForConfig(absl::Milliseconds(300)));

  StartServer(port);
  server_->SetSilent(true);
  server_->Push("v1", {Domain("api", "client", "", 10)});
  ASSERT_TRUE(server_->WaitFor(0, [](const Received&) { return true; }, kWait).has_value());
  EXPECT_FALSE(client_->WaitForConfig(absl::Milliseconds(300)));
  server_->SetSilent(false);
  EXPECT_TRUE(client_->WaitForConfig(kWait));

  // A client whose server never answers stops at once.
  server_->Stop();
  StartServer();
  server_->SetSilent(true);
  XdsConfigClient waiting(FastSettings(server_->address()), {}, store_, [](auto...) {},
                          [](bool) {});
  waiting.Start();
  ASSERT_TRUE(server_->WaitFor(0, [](const Received&) { return true; }, kWait).has_value());
  waiting.Stop();
}

// Verifies a response over --xds_max_message_bytes is refused by gRPC, the stream breaks and
// the running config stays; a later snapshot of a fitting size is put in force.
TEST_F(XdsConfigClientTest, ASnapshotOverTheSizeLimitLeavesTheConfigInForce) {
  StartServer();
  XdsSettings settings = FastSettings(server_->address());
  settings.max_message_bytes = 64 << 10;
  StartClient(settings);
  server_->Push("v1", {Domain("api", "client", "", 10)});
  ASSERT_TRUE(client_->WaitForConfig(kWait));

  std::vector<rls::RateLimitConfig> huge;
  for (int i = 0; i < 3000; ++i) {
    huge.push_back(Domain(absl::StrCat("domain-", i), "key", "value", 1));
  }
  const int streams = server_->streams();
  server_->Push("v2", huge);
  // The stream breaks, the client connects again (and is sent v2 again, and breaks again).
  ASSERT_TRUE(server_
                  ->WaitFor(0, [&](const Received& r) { return r.stream >= streams + 2; }, kWait)
                  .has_value());
  EXPECT_TRUE(HasDomain("api"));
  EXPECT_FALSE(HasDomain("domain-0"));

  ASSERT_TRUE(Answer(0, server_->Push("v3", {Domain("web", "ip", "", 5)})).has_value());
  EXPECT_TRUE(HasDomain("web"));
}

// Verifies a snapshot of 1,000 domains is applied, and prints how long it took from the push
// to the ACK (a figure for bench/README.md, not a check: time is judged by benchmarks).
TEST_F(XdsConfigClientTest, AppliesASnapshotOfAThousandDomains) {
  StartServer();
  StartClient(FastSettings(server_->address()));
  std::vector<rls::RateLimitConfig> domains;
  for (int i = 0; i < 1000; ++i) {
    rls::RateLimitConfig config = Domain(absl::StrCat("tenant-", i), "route", "checkout", 100);
    auto* nested = config.mutable_descriptors(0)->add_descriptors();
    nested->set_key("user");
    nested->mutable_rate_limit()->set_unit(rls::SECOND);
    nested->mutable_rate_limit()->set_requests_per_unit(10);
    domains.push_back(std::move(config));
  }
  const absl::Time pushed = absl::Now();
  ASSERT_TRUE(Answer(0, server_->Push("v1", domains)).has_value());
  std::printf("1,000 domains (2,000 rules): pushed to ACKed in %s\n",
              absl::FormatDuration(absl::Now() - pushed).c_str());
  ASSERT_NE(store_.Get(), nullptr);
  EXPECT_EQ(store_.Get()->domains().size(), 1000u);
  EXPECT_EQ(store_.Get()->RuleCount(), 2000u);
}

// Verifies a version_info over the bound is NACKed saying so, never becomes the version sent
// back in later requests, and reaches the log cut short: the 1 MiB version of the report wrote
// a megabyte a line.
TEST_F(XdsConfigClientTest, NacksAVersionOverTheBoundAndLogsItShort) {
  StartServer();
  StartClient(FastSettings(server_->address()));
  ASSERT_TRUE(Answer(0, server_->Push("v1", {Domain("api", "client", "", 10)})).has_value());

  StderrCapture capture;
  const std::string huge(1 << 20, 'v');
  auto nack = Answer(0, server_->Push(huge, {Domain("web", "ip", "", 5)}));
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->second.request.version_info(), "v1");
  EXPECT_EQ(nack->second.request.error_detail().message(),
            "version_info is 1048576 bytes, more than the 4096 this client accepts");
  EXPECT_FALSE(HasDomain("web"));
  auto ack = Answer(nack->first + 1, server_->Push("v3", {Domain("web", "ip", "", 5)}));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->second.request.version_info(), "v3");
  const std::string log = capture.Stop();

  EXPECT_LT(log.size(), 2048u) << log.substr(0, 2048);
  const std::vector<std::string> rejected = LinesWith(log, "rejected");
  ASSERT_EQ(rejected.size(), 1u) << log.substr(0, 2048);
  EXPECT_THAT(rejected[0], HasSubstr("vvvv...(1048576 bytes) rejected, version v1 stays in force: "
                                     "version_info is 1048576 bytes"));
  for (size_t i = 0; i < server_->requests(); ++i) {
    auto request = server_->WaitFor(i, [](const Received&) { return true; }, kWait);
    ASSERT_TRUE(request.has_value());
    EXPECT_LE(request->second.request.version_info().size(), kMaxXdsVersionBytes);
  }
}

// Verifies a nonce over the bound is NACKed too, the NACK carrying it so that the server can
// match it; the next response with a short nonce is taken.
TEST_F(XdsConfigClientTest, NacksANonceOverTheBound) {
  StartServer();
  StartClient(FastSettings(server_->address()));
  ASSERT_TRUE(Answer(0, server_->Push("v1", {Domain("api", "client", "", 10)})).has_value());

  server_->SetNoncePrefix(std::string(kMaxXdsVersionBytes, 'n'));
  const std::string long_nonce = server_->Push("v2", {Domain("web", "ip", "", 5)});
  auto nack = Answer(0, long_nonce);
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->second.request.version_info(), "v1");
  EXPECT_EQ(nack->second.request.error_detail().message(),
            absl::StrCat("nonce is ", long_nonce.size(), " bytes, more than the 4096 this client "
                         "accepts"));
  EXPECT_FALSE(HasDomain("web"));

  server_->SetNoncePrefix("");
  ASSERT_TRUE(
      Answer(nack->first + 1, server_->Push("v3", {Domain("web", "ip", "", 5)})).has_value());
  EXPECT_TRUE(HasDomain("web"));
}

// Verifies the report's flood: 100 snapshots with a 1 MiB version, each rejected, write a few
// short lines (the first of them, then one per refill of the throttle, which says how many it
// skipped), not 100 MB; every one is still NACKed. The clock stands still but when moved.
TEST_F(XdsConfigClientTest, AFloodOfRejectedSnapshotsWritesAFewShortLines) {
  StartServer();
  StartClient(FastSettings(server_->address()));
  ASSERT_TRUE(Answer(0, server_->Push("v0", {Domain("api", "client", "", 10)})).has_value());

  StderrCapture capture;
  rls::RateLimitConfig bad = Domain("web", "ip", "", 5);
  bad.mutable_descriptors(0)->mutable_rate_limit()->set_unit(rls::UNKNOWN);
  size_t from = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string version = absl::StrCat(i, std::string(1 << 20, 'v'));
    auto nack = Answer(from, server_->Push(version, {bad}));
    ASSERT_TRUE(nack.has_value()) << i;
    ASSERT_TRUE(nack->second.request.has_error_detail());
    from = nack->first + 1;
  }
  clock_.AdvanceMicros(5'000'000);
  auto last = Answer(from, server_->Push("bad-after-a-while", {bad}));
  ASSERT_TRUE(last.has_value());
  ASSERT_TRUE(
      Answer(last->first + 1, server_->Push("v2", {Domain("web", "ip", "", 5)})).has_value());
  const std::string log = capture.Stop();

  const std::vector<std::string> rejected = LinesWith(log, "rejected");
  // The throttle's burst (5), then the one after the clock moved.
  ASSERT_EQ(rejected.size(), 6u) << log.substr(0, 4096);
  EXPECT_THAT(rejected[0], HasSubstr("...(1048577 bytes) rejected, version v0 stays in force: "
                                     "version_info is 1048577 bytes"));
  EXPECT_THAT(rejected[5], HasSubstr("(95 similar not logged) xDS: version bad-after-a-while "
                                     "rejected, version v0 stays in force: xds:xds-web: "
                                     "descriptors[0].rate_limit.unit: missing"));
  EXPECT_LT(log.size(), 8u << 10) << "about 300 bytes a line";
  EXPECT_EQ(LinesWith(log, "in force (").size(), 1u);
}

class XdsTlsTest : public XdsConfigClientTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCa(dir_.path(), "ca").ok());
    ASSERT_TRUE(testing::MakeCa(dir_.path(), "clients").ok());
    absl::Status made = testing::MakeCert(dir_.path(), "server", "ca", "xds.example");
    ASSERT_TRUE(made.ok()) << made;
    ASSERT_TRUE(testing::MakeCert(dir_.path(), "client", "clients").ok());
  }
  std::string File(const std::string& name) { return absl::StrCat(dir_.path(), "/", name); }

  // The server's credentials; with `mutual`, clients must present a certificate of "clients".
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials(bool mutual) {
    grpc::SslServerCredentialsOptions options(
        mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    options.pem_key_cert_pairs.push_back(
        {testing::ReadWholeFile(File("server.key")), testing::ReadWholeFile(File("server.crt"))});
    if (mutual) {
      options.pem_root_certs = testing::ReadWholeFile(File("clients.crt"));
    }
    return grpc::SslServerCredentials(options);
  }

  XdsSettings TlsSettings() {
    XdsSettings settings = FastSettings(server_->address());
    settings.tls = true;
    settings.tls_ca = File("ca.crt");
    return settings;
  }
};

// Verifies TLS with the server's certificate checked against --xds_tls_ca, under the name
// --xds_tls_server_name gives.
TEST_F(XdsTlsTest, ConnectsOverTlsCheckingTheServersName) {
  StartServer(0, ServerCredentials(false));
  server_->Push("v1", {Domain("api", "client", "", 10)});
  XdsSettings settings = TlsSettings();
  settings.tls_server_name = "xds.example";
  StartClient(settings);
  EXPECT_TRUE(client_->WaitForConfig(kWait));

  // A name the certificate does not hold is refused.
  ConfigStore other(nullptr);
  settings.tls_server_name = "elsewhere.example";
  XdsConfigClient wrong_name(settings, {}, other, [](auto...) {}, [](bool) {});
  wrong_name.Start();
  EXPECT_FALSE(wrong_name.WaitForConfig(absl::Seconds(1)));
}

// Verifies mutual TLS: with the client certificate the server asks for, config flows; without
// one, nothing does.
TEST_F(XdsTlsTest, MutualTlsPresentsTheClientCertificate) {
  StartServer(0, ServerCredentials(true));
  server_->Push("v1", {Domain("api", "client", "", 10)});
  ConfigStore anonymous_store(nullptr);
  XdsConfigClient anonymous(TlsSettings(), {}, anonymous_store, [](auto...) {}, [](bool) {});
  anonymous.Start();
  EXPECT_FALSE(anonymous.WaitForConfig(absl::Seconds(1)));

  XdsSettings settings = TlsSettings();
  settings.tls_cert = File("client.crt");
  settings.tls_key = File("client.key");
  StartClient(settings);
  EXPECT_TRUE(client_->WaitForConfig(kWait));
  EXPECT_TRUE(HasDomain("api"));
}

}  // namespace
}  // namespace sluice
