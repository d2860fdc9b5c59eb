// End-to-end: starts the real build/bin/sluice on free loopback ports with a config written by
// the test, and talks to it the way Envoy, operators and sluicectl do.
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::HttpGet;
using testing::MetricValue;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;

constexpr char kConfig[] = R"(domain: e2e
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: bucket
    rate_limit:
      algorithm: token_bucket
      unit: hour
      requests_per_unit: 1
      burst: 2
  - key: shadow
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
)";

std::string Bin(const std::string& name) { return SluiceServer::BinaryPath(name); }

class ServerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_path_ = dir_.WriteFile("config/e2e.yaml", kConfig);
    auto started = SluiceServer::Start(dir_.path() + "/config", {"--config_poll_interval=100ms"},
                                       dir_.path());
    ASSERT_TRUE(started.ok()) << started.status();
    sluice_ = std::move(*started);
    server_ = &sluice_->process();
    grpc_port_ = sluice_->grpc_port();
    http_port_ = sluice_->http_port();
    client_ = std::make_unique<RlsClient>(sluice_->grpc_address());
  }

  RlsResponse Check(const std::string& descriptor, uint32_t hits = 0) {
    auto request = BuildRequest("e2e", {descriptor}, hits);
    EXPECT_TRUE(request.ok());
    auto response = client_->ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : RlsResponse();
  }

  std::string Http(const std::string& method, const std::string& path, const std::string& body = "") {
    std::string cmd = absl::StrCat("curl -s -o - -w '\\n%{http_code}' -X ", method,
                                   " http://127.0.0.1:", http_port_, path);
    if (!body.empty()) {
      absl::StrAppend(&cmd, " -H 'Content-Type: application/json' --data '", body, "'");
    }
    return RunCommand(cmd).second;
  }

  TempDir dir_;
  std::string config_path_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<SluiceServer> sluice_;
  ChildProcess* server_ = nullptr;
  std::unique_ptr<RlsClient> client_;
};

// Verifies a fixed window admits its limit, then answers OVER_LIMIT with retry-after.
TEST_F(ServerE2eTest, FixedWindowAdmitsLimitThenRejectsWithRetryAfter) {
  for (uint32_t expected_remaining : {2u, 1u, 0u}) {
    RlsResponse r = Check("user=alice");
    ASSERT_EQ(r.overall_code(), RlsResponse::OK);
    ASSERT_EQ(r.statuses_size(), 1);
    EXPECT_EQ(r.statuses(0).limit_remaining(), expected_remaining);
    EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(r.statuses(0).current_limit().unit(), RlsResponse::RateLimit::HOUR);
  }
  RlsResponse over = Check("user=alice");
  EXPECT_EQ(over.overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).code(), RlsResponse::OVER_LIMIT);
  ASSERT_EQ(over.response_headers_to_add_size(), 1);
  EXPECT_EQ(over.response_headers_to_add(0).key(), "retry-after");
  int64_t retry = std::stoll(over.response_headers_to_add(0).value());
  EXPECT_GT(retry, 0);
  EXPECT_LE(retry, 3600);
  EXPECT_GE(over.statuses(0).duration_until_reset().seconds() + 1, retry);
  // Another user has their own counter.
  EXPECT_EQ(Check("user=bob").overall_code(), RlsResponse::OK);
}

// Verifies the token bucket extension: a burst of 2, then rejection until refill.
TEST_F(ServerE2eTest, TokenBucketAllowsBurstThenRejects) {
  EXPECT_EQ(Check("bucket=b", 2).overall_code(), RlsResponse::OK);
  RlsResponse over = Check("bucket=b");
  EXPECT_EQ(over.overall_code(), RlsResponse::OVER_LIMIT);
  // One token per hour: the wait is about an hour, never less than the refill of one token.
  EXPECT_GE(over.statuses(0).duration_until_reset().seconds(), 3590);
}

// Verifies unknown domains and unmatched descriptors answer OK without a limit.
TEST_F(ServerE2eTest, UnknownDomainAndNoMatchAreOk) {
  auto request = BuildRequest("nobody", {"user=alice"}, 0);
  auto response = client_->ShouldRateLimit(*request, absl::Seconds(5));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->overall_code(), RlsResponse::OK);
  RlsResponse unmatched = Check("color=red");
  EXPECT_EQ(unmatched.overall_code(), RlsResponse::OK);
  EXPECT_FALSE(unmatched.statuses(0).has_current_limit());
}

// Verifies shadow mode counts but never rejects.
TEST_F(ServerE2eTest, ShadowModeNeverRejects) {
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Check("shadow=s").overall_code(), RlsResponse::OK);
  }
}

// Verifies bad requests get INVALID_ARGUMENT with a message naming the problem.
TEST_F(ServerE2eTest, BadRequestIsInvalidArgument) {
  RlsRequest request;
  request.set_domain("e2e");
  auto response = client_->ShouldRateLimit(request, absl::Seconds(5));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("descriptors"));
  request.add_descriptors()->add_entries()->set_value("v");
  response = client_->ShouldRateLimit(request, absl::Seconds(5));
  ASSERT_FALSE(response.ok());
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr("descriptors[0].entries[0].key must not be empty"));
}

// Verifies bytes that are not a RateLimitRequest get INVALID_ARGUMENT with a message saying so
// (not gRPC's bare default), and that the server keeps answering valid requests after them.
TEST_F(ServerE2eTest, UnparsableRequestIsInvalidArgument) {
  const std::string method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
  // Field 1 (domain) says 100 bytes follow; there are 3.
  EXPECT_EQ(testing::GrpcRawUnaryCall(sluice_->grpc_address(), method, std::string("\x0a" "\x64" "abc", 5)),
            "error 3: the request is not a valid envoy.service.ratelimit.v3.RateLimitRequest "
            "(5 bytes that do not parse as one)");
  // A wire type no field may have (field 1, group end).
  EXPECT_THAT(testing::GrpcRawUnaryCall(sluice_->grpc_address(), method, std::string("\x0c", 1)),
              HasSubstr("error 3: the request is not a valid"));
  EXPECT_EQ(Check("fw=a").overall_code(), RlsResponse::OK);
}

// Verifies the standard gRPC health service answers SERVING.
TEST_F(ServerE2eTest, GrpcHealthServiceServes) {
  // HealthCheckResponse{status: SERVING (1)} is field 1, varint 1.
  EXPECT_EQ(testing::GrpcHealthCheck(absl::StrCat("127.0.0.1:", grpc_port_), ""),
            std::string("\x08\x01", 2));
}

// Verifies HTTP /json decides like gRPC, and the operational endpoints answer.
TEST_F(ServerE2eTest, HttpEndpointsServeJsonHealthConfigAndMetrics) {
  std::string body = R"({"domain":"e2e","descriptors":[{"entries":[{"key":"user","value":"carol"}]}]})";
  std::string ok = Http("POST", "/json", body);
  EXPECT_THAT(ok, HasSubstr("\"overallCode\":\"OK\""));
  EXPECT_THAT(ok, HasSubstr("\n200"));
  Http("POST", "/json", body);
  Http("POST", "/json", body);
  // The 429 carries the response's headers, Retry-After among them (curl -D - prints them).
  std::string over = RunCommand(absl::StrCat(
                                    "curl -s -D - -o - -w '\\n%{http_code}' -X POST http://127.0.0.1:",
                                    http_port_, "/json -H 'Content-Type: application/json' --data '",
                                    body, "'"))
                         .second;
  EXPECT_THAT(over, HasSubstr("OVER_LIMIT"));
  EXPECT_THAT(over, HasSubstr("\n429"));
  EXPECT_THAT(over, ::testing::ContainsRegex("retry-after: [1-9][0-9]*\r\n"));
  EXPECT_THAT(Http("POST", "/json", "{not json"), HasSubstr("\n400"));
  EXPECT_THAT(Http("GET", "/healthz"), HasSubstr("OK\n\n200"));
  EXPECT_EQ(Http("GET", "/healthcheck"), "OK\n200");  // envoyproxy/ratelimit's exact answer
  EXPECT_THAT(Http("GET", "/config"), HasSubstr("e2e.user"));
  EXPECT_THAT(Http("GET", "/rlconfig"), HasSubstr("e2e.user"));
  std::string metrics = Http("GET", "/metrics");
  EXPECT_THAT(metrics, HasSubstr("sluice_rule_over_limit{key=\"e2e.user\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("sluice_rule_total_hits{key=\"e2e.user\"} 4"));
  // Latency by transport, decisions by algorithm and outcome, the config's version.
  EXPECT_EQ(Check("fw=metrics").overall_code(), RlsResponse::OK);
  // The page is rendered at most once a second: the next render shows the gRPC call.
  for (int i = 0; i < 50 && !absl::StrContains(metrics, "transport=\"grpc\"} 1"); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    metrics = Http("GET", "/metrics");
  }
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "sluice_request_duration_seconds_count\\{transport=\"grpc\"\\} [1-9]"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "sluice_request_duration_seconds_count\\{transport=\"http\"\\} [5-9]"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "sluice_decisions_total\\{algorithm=\"fixed_window\",outcome=\"over_"
                           "limit\"\\} [1-9]"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex("sluice_config_info\\{version=\"[0-9a-f]{12}\"\\} 1"));
  EXPECT_THAT(metrics, HasSubstr("sluice_config_generation 1\n"));
}

// Verifies /json refuses what protobuf's lenient parser took (finding 6): arrays in arrays,
// duplicate keys, and a 4 MB body of brackets, each 400 with what and where; the server keeps
// answering after them.
TEST_F(ServerE2eTest, JsonIsCheckedStrictlyBeforeParsing) {
  EXPECT_EQ(Http("POST", "/json",
                 R"({"domain":"e2e","descriptors":[[{"entries":[{"key":"user","value":"a"}]}]]})"),
            "invalid RateLimitRequest JSON: an array inside an array at byte 31: RateLimitRequest "
            "JSON has no such field\n\n400");
  EXPECT_EQ(Http("POST", "/json",
                 R"({"domain":"a","domain":"e2e","descriptors":[{"entries":[{"key":"user",)"
                 R"("value":"a"}]}]})"),
            "invalid RateLimitRequest JSON: duplicate key \"domain\" at byte 14 (first at byte "
            "1)\n\n400");
  // Under the 4 MiB body limit, so that it reaches the check.
  std::string brackets = R"({"descriptors":)";
  brackets.append((4 << 20) - 1024 - brackets.size(), '[');
  const std::string file = dir_.WriteFile("brackets.json", brackets);
  EXPECT_EQ(RunCommand(absl::StrCat("curl -s -o - -w '\\n%{http_code}' -X POST http://127.0.0.1:",
                                    http_port_, "/json --data-binary @", file))
                .second,
            "invalid RateLimitRequest JSON: an array inside an array at byte 16: RateLimitRequest "
            "JSON has no such field\n\n400");
  EXPECT_EQ(Http("GET", "/healthcheck"), "OK\n200");
  EXPECT_THAT(Http("POST", "/json",
                   R"({"domain":"e2e","descriptors":[{"entries":[{"key":"user","value":"a"}]}]})"),
              HasSubstr("\n200"));
}

// Verifies a refund (Envoy 1.38's is_negative_hits) gives hits back on gRPC, /json and
// sluicectl --refund alike: answered OK with the state after it, and the capacity it returns is
// admitted at once; on a token bucket too, and never past full.
TEST_F(ServerE2eTest, RefundGivesHitsBack) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Check("user=erin").overall_code(), RlsResponse::OK);
  }
  ASSERT_EQ(Check("user=erin").overall_code(), RlsResponse::OVER_LIMIT);
  auto refund = BuildRequest("e2e", {"user=erin"}, 0);
  ASSERT_TRUE(refund.ok());
  refund->mutable_descriptors(0)->set_is_negative_hits(true);
  auto response = client_->ShouldRateLimit(*refund, absl::Seconds(5));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->overall_code(), RlsResponse::OK);
  EXPECT_EQ(response->statuses(0).limit_remaining(), 1u);
  EXPECT_THAT(Http("POST", "/json",
                   R"({"domain":"e2e","descriptors":[{"entries":[{"key":"user","value":"erin"}],)"
                   R"("is_negative_hits":true}]})"),
              AllOf(HasSubstr(R"("limitRemaining":2)"), HasSubstr("\n200")));
  auto [status, out] = RunCommand(absl::StrCat(Bin("sluicectl"), " --server=127.0.0.1:",
                                               grpc_port_, " check e2e user=erin --refund"));
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(Check("user=erin").statuses(0).limit_remaining(), 2u);
  // A token bucket: the tokens come back, up to its burst.
  ASSERT_EQ(Check("bucket=b", 2).overall_code(), RlsResponse::OK);
  ASSERT_EQ(Check("bucket=b").overall_code(), RlsResponse::OVER_LIMIT);
  auto bucket = BuildRequest("e2e", {"bucket=b"}, 5);
  ASSERT_TRUE(bucket.ok());
  bucket->mutable_descriptors(0)->set_is_negative_hits(true);
  auto refilled = client_->ShouldRateLimit(*bucket, absl::Seconds(5));
  ASSERT_TRUE(refilled.ok()) << refilled.status();
  EXPECT_EQ(refilled->statuses(0).limit_remaining(), 2u);
  EXPECT_EQ(Check("bucket=b", 3).overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(Check("bucket=b", 2).overall_code(), RlsResponse::OK);
  EXPECT_GE(MetricValue(Http("GET", "/metrics"),
                        R"(sluice_hits_refunded_total{algorithm="fixed_window"})"),
            3);
}

// Verifies sluicectl prints a table and exits 0 for OK, 2 for OVER_LIMIT, 1 for errors.
TEST_F(ServerE2eTest, SluicectlExitCodes) {
  std::string base = absl::StrCat(Bin("sluicectl"), " --server=127.0.0.1:", grpc_port_, " check e2e ");
  auto [ok_status, ok_out] = RunCommand(base + "user=dave --hits=3");
  EXPECT_EQ(ok_status, 0) << ok_out;
  EXPECT_THAT(ok_out, HasSubstr("user=dave"));
  EXPECT_THAT(ok_out, HasSubstr("3/hour"));
  auto [over_status, over_out] = RunCommand(base + "user=dave");
  EXPECT_EQ(over_status, 2) << over_out;
  EXPECT_THAT(over_out, HasSubstr("OVER_LIMIT"));
  auto [err_status, err_out] = RunCommand(base + "=oops");
  EXPECT_EQ(err_status, 1) << err_out;
  auto [down_status, down_out] = RunCommand(
      absl::StrCat(Bin("sluicectl"), " --server=127.0.0.1:1 --timeout=1s check e2e user=x"));
  EXPECT_EQ(down_status, 1) << down_out;
}

// Verifies a config change is picked up without a restart, and a broken one is rejected while
// the running config stays in force.
TEST_F(ServerE2eTest, ReloadsConfigAndRejectsBrokenOne) {
  dir_.WriteFile("config/e2e.yaml", std::string(kConfig) + R"(  - key: fresh
    rate_limit:
      unit: hour
      requests_per_unit: 1
)");
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {
    reloaded = Check("fresh=1").statuses(0).has_current_limit();
    if (!reloaded) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_TRUE(reloaded) << server_->ReadLog();
  dir_.WriteFile("config/e2e.yaml", "domain: e2e\ndescriptors:\n  - key: user\n    bogus: 1\n");
  bool rejected = false;
  for (int i = 0; i < 100 && !rejected; ++i) {
    rejected = absl::StrContains(server_->ReadLog(), "config reload rejected");
    if (!rejected) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_TRUE(rejected) << server_->ReadLog();
  EXPECT_TRUE(Check("fresh=2").statuses(0).has_current_limit());
}

// Verifies SIGTERM drains and exits 0.
TEST_F(ServerE2eTest, SigtermExitsZero) {
  Check("user=erin");
  int status = server_->Stop(SIGTERM, std::chrono::seconds(20));
  ASSERT_NE(status, -1);
  ASSERT_TRUE(WIFEXITED(status)) << server_->ReadLog();
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Verifies a broken pipe does not kill the server: hiredis and the HTTP server write to sockets
// with write(2), so a peer that went away raises SIGPIPE, which the server must ignore.
TEST_F(ServerE2eTest, SurvivesSigpipe) {
  ASSERT_EQ(::kill(server_->pid(), SIGPIPE), 0);
  absl::SleepFor(absl::Milliseconds(100));  // delivered by then
  EXPECT_EQ(Check("user=frank").overall_code(), RlsResponse::OK) << server_->ReadLog();
}

// Verifies --check_config accepts a good config and rejects a bad one naming file and line.
TEST(ServerCheckConfigTest, ReportsGoodAndBadConfigs) {
  TempDir dir;
  std::string good = dir.WriteFile("good.yaml", kConfig);
  auto [good_status, good_out] = RunCommand(Bin("sluice") + " --check_config --config=" + good);
  EXPECT_EQ(good_status, 0) << good_out;
  EXPECT_THAT(good_out, HasSubstr("config OK"));
  std::string bad = dir.WriteFile(
      "bad.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n"
                  "      requests_per_unit: 1\n");
  auto [bad_status, bad_out] = RunCommand(Bin("sluice") + " --check_config --config=" + bad);
  EXPECT_EQ(bad_status, 1) << bad_out;
  EXPECT_THAT(bad_out, HasSubstr("bad.yaml:5"));
  EXPECT_THAT(bad_out, HasSubstr("unit"));
  EXPECT_THAT(bad_out, HasSubstr("fortnight"));
  // What envoyproxy/ratelimit accepts leniently passes, with a warning naming file and line.
  std::string lenient = dir.WriteFile(
      "lenient.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n");
  auto [lenient_status, lenient_out] =
      RunCommand(Bin("sluice") + " --check_config --config=" + lenient);
  EXPECT_EQ(lenient_status, 0) << lenient_out;
  EXPECT_THAT(lenient_out, HasSubstr("config OK: 1 domains, 1 rules, 1 warnings"));
  EXPECT_THAT(lenient_out, HasSubstr("warning: " + lenient +
                                     ":4: descriptors[0].rate_limit.requests_per_unit: missing"));
}

// Verifies flags can come from SLUICE_* environment variables.
TEST(ServerEnvironmentTest, FlagsFromEnvironment) {
  TempDir dir;
  std::string good = dir.WriteFile("good.yaml", kConfig);
  auto [status, out] = RunCommand("SLUICE_CHECK_CONFIG=true SLUICE_CONFIG=" + good + " " +
                                  Bin("sluice"));
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("config OK"));
  auto [bad_status, bad_out] = RunCommand("SLUICE_MAX_ENTRIES=lots " + Bin("sluice"));
  EXPECT_EQ(bad_status, 1);
  EXPECT_THAT(bad_out, HasSubstr("SLUICE_MAX_ENTRIES"));
}

// Verifies --memory_max_mib bounds the memory backend in bytes: keys with 1000-byte values are
// evicted to stay within 1 MiB, and /metrics says so; a bound of 0 is refused by name.
TEST(ServerMemoryBoundTest, MemoryMaxMibBoundsTheBackend) {
  TempDir dir;
  dir.WriteFile("config/e2e.yaml", kConfig);
  auto started = SluiceServer::Start(dir.path() + "/config", {"--memory_max_mib=1"}, dir.path());
  ASSERT_TRUE(started.ok()) << started.status();
  RlsClient client((*started)->grpc_address());
  // About 1.2 KB each as stored: 1500 of them are well past 1 MiB.
  for (int i = 0; i < 1500; ++i) {
    std::string value = absl::StrCat(i, "-");
    value.resize(1000, 'v');
    auto request = BuildRequest("e2e", {"user=" + value}, 1);
    ASSERT_TRUE(request.ok()) << request.status();
    auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_EQ(response->overall_code(), RlsResponse::OK);
  }
  const std::string metrics = HttpGet((*started)->http_port(), "/metrics");
  EXPECT_EQ(MetricValue(metrics, "sluice_memory_backend_max_bytes"), 1048576) << metrics;
  EXPECT_LE(MetricValue(metrics, "sluice_memory_backend_bytes"), 1048576);
  EXPECT_GT(MetricValue(metrics, "sluice_memory_backend_bytes"), 512 * 1024);
  EXPECT_GT(MetricValue(metrics, "sluice_memory_backend_evictions_total"), 500);
  EXPECT_LT(MetricValue(metrics, "sluice_memory_backend_keys"), 1000);

  auto [status, out] = RunCommand(absl::StrCat(Bin("sluice"), " --config=", dir.path(),
                                               "/config --memory_max_mib=0"));
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("--memory_max_mib: 0 is not between 1 and"));
  std::tie(status, out) = RunCommand(absl::StrCat(Bin("sluice"), " --config=", dir.path(),
                                                  "/config --over_limit_cache_max_mib=-5"));
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("--over_limit_cache_max_mib: -5 is not between 1 and"));
}

}  // namespace
}  // namespace sluice
