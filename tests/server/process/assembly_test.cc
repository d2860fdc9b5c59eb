#include "server/process/assembly.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using testing::GrpcHealthCheck;
using ::testing::HasSubstr;
using testing::HttpGet;
using ::testing::MatchesRegex;
using testing::TempDir;

constexpr char kServing[] = "\x08\x01";
constexpr char kNotServing[] = "\x08\x02";
constexpr char kConfig[] =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n";

Settings LoopbackSettings(const std::string& config_path) {
  Settings settings;
  settings.config.path = config_path;
  settings.grpc.address = "127.0.0.1:0";
  settings.http.address = "127.0.0.1:0";
  return settings;
}

// Verifies a memory-backed assembly binds nothing until started, then serves gRPC (health) and
// HTTP on the ports it reports.
TEST(AssemblyTest, BuildsAMemoryServerThatListensWhenStarted) {
  TempDir dir;
  const std::string path = dir.WriteFile("limits.yaml", kConfig);
  auto config = LoadConfigPath(path);
  ASSERT_TRUE(config.ok()) << config.status();
  auto parts = Assembly::Create(LoopbackSettings(path), std::move(*config));
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ((*parts)->http().port(), 0);
  EXPECT_TRUE((*parts)->redis_backends().empty());
  ASSERT_TRUE((*parts)->StartGrpc().ok());
  (*parts)->FollowConfigHealth();
  ASSERT_TRUE((*parts)->StartHttp().ok());
  const std::string summary = (*parts)->ServingSummary();
  EXPECT_THAT(summary,
              MatchesRegex("gRPC on port [0-9]+, HTTP on port [0-9]+, backend memory, 1 rules"));
  const std::string grpc_port = summary.substr(13, summary.find(',') - 13);
  EXPECT_EQ(GrpcHealthCheck("127.0.0.1:" + grpc_port, "ratelimit"), kServing);
  EXPECT_THAT(HttpGet((*parts)->http().port(), "/healthz"), HasSubstr("200"));
  EXPECT_TRUE((*parts)->StopReloads());
}

// Verifies that with --healthy_with_at_least_one_config_loaded and no config yet, health says
// NOT_SERVING until a reload puts a config with a domain in force.
TEST(AssemblyTest, HealthFollowsTheConfigThatReloadsPutInForce) {
  TempDir dir;
  const std::string path = dir.WriteFile("limits.yaml", kConfig);
  Settings settings = LoopbackSettings(path);
  settings.healthy_requires_config = true;
  auto parts = Assembly::Create(settings, nullptr);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_TRUE((*parts)->StartGrpc().ok());
  EXPECT_FALSE((*parts)->ConfigHealthy());
  (*parts)->FollowConfigHealth();
  const std::string summary = (*parts)->ServingSummary();
  const std::string address = "127.0.0.1:" + summary.substr(13, summary.find(',') - 13);
  EXPECT_EQ(GrpcHealthCheck(address, ""), kNotServing);

  (*parts)->RequestReload(/*force=*/true);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (GrpcHealthCheck(address, "") != kServing && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(GrpcHealthCheck(address, "envoy.service.ratelimit.v3.RateLimitService"), kServing);
  EXPECT_TRUE((*parts)->ConfigHealthy());
  EXPECT_THAT((*parts)->ServingSummary(), HasSubstr("1 rules"));
}

// Verifies --wait_for_backend holds health unhealthy (gRPC NOT_SERVING, /healthcheck 500)
// whatever a reload puts in force, until BackendAnswered; then health follows the config; and
// the summary says when connections age out.
TEST(AssemblyTest, HealthWaitsForTheBackendThroughReloads) {
  TempDir dir;
  const std::string path = dir.WriteFile("limits.yaml", kConfig);
  Settings settings = LoopbackSettings(path);
  settings.healthy_requires_config = true;
  settings.wait_for_backend.enabled = true;
  settings.grpc.max_connection_age = absl::Minutes(30);
  auto parts = Assembly::Create(settings, nullptr);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_TRUE((*parts)->BackendReady());  // memory: at once; the lifecycle then says so
  ASSERT_TRUE((*parts)->StartGrpc().ok());
  (*parts)->FollowConfigHealth();
  ASSERT_TRUE((*parts)->StartHttp().ok());
  const std::string summary = (*parts)->ServingSummary();
  EXPECT_THAT(summary, HasSubstr(", gRPC connections sent GOAWAY at 30m of age (+/-10%)"));
  const std::string address = "127.0.0.1:" + summary.substr(13, summary.find(',') - 13);
  const int http_port = (*parts)->http().port();

  (*parts)->RequestReload(/*force=*/true);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!(*parts)->ConfigHealthy() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE((*parts)->ConfigHealthy());
  EXPECT_EQ(GrpcHealthCheck(address, ""), kNotServing);
  EXPECT_EQ(GrpcHealthCheck(address, "ratelimit"), kNotServing);
  EXPECT_THAT(HttpGet(http_port, "/healthcheck"), HasSubstr("500"));

  (*parts)->BackendAnswered();
  EXPECT_EQ(GrpcHealthCheck(address, ""), kServing);
  EXPECT_EQ(GrpcHealthCheck(address, "ratelimit"), kServing);
  EXPECT_EQ(HttpGet(http_port, "/healthcheck"), "OK\n200");
  EXPECT_TRUE((*parts)->StopReloads());
}

// Verifies a Redis backend that cannot be made fails the assembly naming the backend.
TEST(AssemblyTest, NamesARedisBackendItCannotCreate) {
  Settings settings = LoopbackSettings("/nonexistent");
  settings.backend.kind = BackendKind::kRedis;
  settings.backend.redis.addresses = {"unix:"};
  auto parts = Assembly::Create(settings, nullptr);
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().message(), "redis: redis address 'unix:' names no socket path");
}

// Verifies TLS files that cannot be read fail the assembly naming the flag and the file.
TEST(AssemblyTest, NamesATlsFileItCannotRead) {
  Settings settings = LoopbackSettings("/nonexistent");
  settings.grpc.tls_cert = "/nonexistent/cert.pem";
  settings.grpc.tls_key = "/nonexistent/key.pem";
  auto parts = Assembly::Create(settings, nullptr);
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().message(), "--tls_cert: cannot read /nonexistent/cert.pem");
}

}  // namespace
}  // namespace sluice
