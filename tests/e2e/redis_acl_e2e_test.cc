// Verifies the documented minimal ACL (examples/redis-acl.conf) is enough for Sluice: every
// algorithm, a co-located group and a fixed window's give-back decide through a Redis user
// that may run only the commands listed there, with no backend failure; plain, and over mutual
// TLS (the managed services' setup: in-transit encryption, a client certificate, an ACL user).
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/certificates.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"
#include "tests/support/paths.h"

namespace sluice {
namespace {

using testing::HttpGet;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPassword[] = "acl-test-secret";

constexpr char kConfig[] = R"(domain: acl
descriptors:
  - key: fw
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 2}
  - key: swl
    rate_limit: {algorithm: sliding_window_log, unit: minute, requests_per_unit: 2}
  - key: swc
    rate_limit: {algorithm: sliding_window_counter, unit: minute, requests_per_unit: 2}
  - key: tb
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 2, burst: 2}
  - key: lb
    rate_limit: {algorithm: leaky_bucket, unit: minute, requests_per_unit: 2, burst: 2}
  - key: gcra
    rate_limit: {algorithm: gcra, unit: minute, requests_per_unit: 2, burst: 2}
  - key: user
    descriptors:
      - key: a
        rate_limit: {unit: minute, requests_per_unit: 2, hash_tag: user}
      - key: b
        rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 2, hash_tag: user}
)";

// The `user` line of examples/redis-acl.conf, without the keyword, with kPassword.
std::string DocumentedAclUser() {
  std::ifstream in(testing::SourceDir() + "/examples/redis-acl.conf");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("user ", 0) == 0) {
      return absl::StrReplaceAll(line.substr(5), {{"CHANGE-ME", kPassword}});
    }
  }
  ADD_FAILURE() << "no user line in examples/redis-acl.conf";
  return "";
}

class RedisAclTest : public ::testing::TestWithParam<bool> {};

TEST_P(RedisAclTest, DocumentedMinimalAclRunsEveryAlgorithm) {
  const bool tls = GetParam();
  TempDir dir;
  testing::RedisServerOptions options{.acl_users = {DocumentedAclUser()}};
  std::vector<std::string> flags = {"--backend=redis", "--redis_username=sluice",
                                    absl::StrCat("--redis_password=", kPassword),
                                    "--redis_clock=redis", "--redis_breaker_failures=0",
                                    "--admin_api"};
  if (tls) {
    ASSERT_TRUE(testing::MakeCa(dir.path(), "ca").ok());
    ASSERT_TRUE(testing::MakeCert(dir.path(), "redis", "ca").ok());
    ASSERT_TRUE(testing::MakeClientCert(dir.path(), "sluice", "ca").ok());
    options.tls = {.enabled = true,
                   .cert_file = dir.path() + "/redis.crt",
                   .key_file = dir.path() + "/redis.key",
                   .ca_file = dir.path() + "/ca.crt",
                   .client_auth = testing::RedisServerTlsOptions::ClientAuth::kYes};
    flags.insert(flags.end(), {"--redis_tls", absl::StrCat("--redis_tls_ca=", dir.path(), "/ca.crt"),
                               absl::StrCat("--redis_tls_cert=", dir.path(), "/sluice.crt"),
                               absl::StrCat("--redis_tls_key=", dir.path(), "/sluice.key")});
  }
  auto redis = RedisServer::Start(options);
  ASSERT_TRUE(redis.ok()) << redis.status();
  flags.push_back(absl::StrCat("--redis_addresses=",
                               tls ? (*redis)->tls_address() : (*redis)->address()));
  const std::string config = dir.WriteFile("acl.yaml", kConfig);
  auto sluice = SluiceServer::Start(config, flags, dir.path());
  ASSERT_TRUE(sluice.ok()) << sluice.status();
  RlsClient client((*sluice)->grpc_address());

  const auto decide = [&](std::vector<std::string> descriptors) {
    auto request = BuildRequest("acl", descriptors, 0);
    EXPECT_TRUE(request.ok()) << request.status();
    auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->overall_code() : RlsResponse::UNKNOWN;
  };
  // Each algorithm: two admitted, the third denied (decided by Redis, not by failure_mode=allow).
  for (const char* key : {"fw", "swl", "swc", "tb", "lb", "gcra"}) {
    const std::string descriptor = absl::StrCat(key, "=k");
    EXPECT_EQ(decide({descriptor}), RlsResponse::OK) << key;
    EXPECT_EQ(decide({descriptor}), RlsResponse::OK) << key;
    EXPECT_EQ(decide({descriptor}), RlsResponse::OVER_LIMIT) << key;
  }
  // A co-located group (one script call for both descriptors).
  EXPECT_EQ(decide({"user=u1,a=x", "user=u1,b=y"}), RlsResponse::OK);
  EXPECT_EQ(decide({"user=u1,a=x", "user=u1,b=y"}), RlsResponse::OK);
  EXPECT_EQ(decide({"user=u1,a=x", "user=u1,b=y"}), RlsResponse::OVER_LIMIT);

  // The admin API's inspect and reset of every algorithm's key, and the reset log (read by the
  // replica every second, written by the reset).
  const std::string body =
      R"({"domain":"acl","descriptors":[{"entries":[{"key":"fw","value":"k"}]},)"
      R"({"entries":[{"key":"swl","value":"k"}]},{"entries":[{"key":"tb","value":"k"}]}]})";
  for (const char* call : {"inspect", "reset"}) {
    const auto [status, answer] = testing::RunCommand(absl::StrCat(
        "curl -s -o - -w '\\n%{http_code}' -X POST http://127.0.0.1:", (*sluice)->http_port(),
        "/admin/", call, " --data '", body, "'"));
    EXPECT_THAT(answer, ::testing::EndsWith("\n200")) << call << ": " << answer;
  }
  EXPECT_EQ(decide({"fw=k"}), RlsResponse::OK);  // reset
  absl::SleepFor(absl::Milliseconds(1100));  // a read of the reset log, and a new /metrics page

  const std::string metrics = HttpGet((*sluice)->http_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("sluice_reset_log_reads_total{result=\"failed\"} 0\n"));
  EXPECT_THAT(metrics, Not(HasSubstr("sluice_backend_failures_total{reason=\"other\"} 1")));
  for (const char* reason :
       {"other", "connection", "timeout_in_flight", "timeout_before_send", "tls"}) {
    EXPECT_THAT(metrics,
                HasSubstr(absl::StrCat("sluice_backend_failures_total{reason=\"", reason, "\"} 0")))
        << reason;
  }
  // And the user really is limited: it may not run what the ACL leaves out.
  EXPECT_THAT((*redis)->Command({"ACL", "DRYRUN", "sluice", "FLUSHALL"}).value_or("?"),
              Not(HasSubstr("OK")));
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, RedisAclTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("MutualTls") : std::string("Plain");
                         });

}  // namespace
}  // namespace sluice
