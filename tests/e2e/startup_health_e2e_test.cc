// End-to-end: health at start as envoyproxy/ratelimit's (its commit b8d893f, "add retry in init
// phase instead of panic directly"), on the real build/bin/sluice and a real redis-server. Under
// upstream's variables, health is unhealthy until Redis first answers (gRPC NOT_SERVING,
// /healthcheck 500), checked on the REDIS_STARTUP_* schedule, while calls are answered by the
// failure policy; once Redis has answered, health stays healthy when Redis goes away, and the
// failure policy decides. With --wait_for_backend_max_elapsed, a Redis that never answers stops
// the process (exit status 1). Without upstream's variables or --wait_for_backend, health does
// not wait, as before.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::ChildProcess;
using testing::FreePort;
using testing::GrpcHealthCheck;
using testing::HttpGet;
using testing::RedisServer;
using testing::RedisServerOptions;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

constexpr char kConfig[] =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: "
    "1000}\n";
// HealthCheckResponse{status}: SERVING is 1, NOT_SERVING 2.
constexpr char kServing[] = "\x08\x01";
constexpr char kNotServing[] = "\x08\x02";

class StartupHealthE2eTest : public ::testing::Test {
 protected:
  // Starts sluice on free loopback ports (flags) with the environment `env` (none: native) and
  // `flags`; waits for both ports.
  void Start(const std::vector<std::string>& env, const std::vector<std::string>& flags) {
    grpc_port_ = FreePort();
    http_port_ = FreePort();
    std::vector<std::string> argv = {SluiceServer::BinaryPath("sluice"),
                                     "--config=" + dir_.WriteFile("c.yaml", kConfig),
                                     absl::StrCat("--grpc_address=127.0.0.1:", grpc_port_),
                                     absl::StrCat("--http_address=127.0.0.1:", http_port_)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    sluice_ = std::make_unique<ChildProcess>(argv, dir_.path() + "/sluice.log", env);
    ASSERT_TRUE(WaitForPort(http_port_, std::chrono::seconds(20))) << sluice_->ReadLog();
    ASSERT_TRUE(WaitForPort(grpc_port_, std::chrono::seconds(20))) << sluice_->ReadLog();
  }

  std::string Health(const std::string& service = "") {
    return GrpcHealthCheck(absl::StrCat("127.0.0.1:", grpc_port_), service);
  }
  std::string Healthcheck() { return HttpGet(http_port_, "/healthcheck"); }

  // The overall code of a call for k=v, or -1 when the call fails.
  int Decide() {
    RlsClient client(absl::StrCat("127.0.0.1:", grpc_port_));
    auto request = BuildRequest("d", {"k=v"}, 0);
    auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
    return response.ok() ? static_cast<int>(response->overall_code()) : -1;
  }

  // True once /healthcheck answers `code`, polling for up to `timeout`.
  bool WaitForHealthcheck(const std::string& code, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (absl::EndsWith(Healthcheck(), absl::StrCat("\n", code))) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  TempDir dir_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<ChildProcess> sluice_;
};

// Verifies the whole start under upstream's variables with a Redis not there yet: unhealthy
// (gRPC NOT_SERVING for "" and "ratelimit", /healthcheck 500) while calls are answered by the
// failure policy (deny: OVER_LIMIT); healthy within the schedule once Redis is started, and
// deciding in Redis; then Redis killed: still healthy (no flapping), the failure policy deciding
// again and /readyz saying the backend is not ready.
TEST_F(StartupHealthE2eTest, UnhealthyUntilRedisFirstAnswersThenStaysHealthy) {
  const int redis_port = FreePort();
  Start({"REDIS_SOCKET_TYPE=tcp", absl::StrCat("REDIS_URL=127.0.0.1:", redis_port),
         "REDIS_STARTUP_INITIAL_INTERVAL=100ms", "REDIS_STARTUP_MAX_INTERVAL=200ms",
         "DEBUG_HOST=127.0.0.1", absl::StrCat("DEBUG_PORT=", FreePort()), "USE_STATSD=false"},
        {"--failure_mode=deny"});
  EXPECT_EQ(Health(), kNotServing);
  EXPECT_EQ(Health("ratelimit"), kNotServing);
  EXPECT_EQ(Healthcheck(), "waiting for the backend's first answer\n\n500");
  EXPECT_EQ(Decide(), envoy::service::ratelimit::v3::RateLimitResponse::OVER_LIMIT);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Health(), kNotServing) << "healthy before Redis ever answered";

  RedisServerOptions options;
  options.port = redis_port;
  auto redis = RedisServer::Start(options);
  ASSERT_TRUE(redis.ok()) << redis.status();
  // The client reconnects within 2 s of backoff; the next check (at most 200 ms later) sees it.
  ASSERT_TRUE(WaitForHealthcheck("200", std::chrono::seconds(10))) << sluice_->ReadLog();
  EXPECT_EQ(Health(), kServing);
  EXPECT_EQ(Health("ratelimit"), kServing);
  EXPECT_EQ(Decide(), envoy::service::ratelimit::v3::RateLimitResponse::OK);
  // Upstream's variables keep upstream's keys: d_k_v_<window start>.
  auto keys = (*redis)->Command({"KEYS", "d_k_v_*"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, HasSubstr("d_k_v_")) << "not decided in Redis";

  (*redis)->Kill();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Decide(), envoy::service::ratelimit::v3::RateLimitResponse::OVER_LIMIT) << i;
    EXPECT_EQ(Health(), kServing) << i;
    EXPECT_THAT(Healthcheck(), EndsWith("\n200")) << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_THAT(HttpGet(http_port_, "/readyz"), StartsWith("backend redis not ready"));
}

// Verifies --wait_for_backend_max_elapsed on the native flags: a Redis that never answers stops
// the process with exit status 1 and a message naming the flag, once a check finds it silent
// past the max (upstream panics there), and health is unhealthy until then.
TEST_F(StartupHealthE2eTest, StopsWhenTheBackendNeverAnswers) {
  Start({}, {"--backend=redis", absl::StrCat("--redis_addresses=127.0.0.1:", FreePort()),
             "--wait_for_backend", "--wait_for_backend_initial_interval=100ms",
             "--wait_for_backend_max_interval=300ms", "--wait_for_backend_max_elapsed=3s"});
  EXPECT_THAT(Healthcheck(), EndsWith("\n500"));
  EXPECT_EQ(Health(), kNotServing);
  const auto start = std::chrono::steady_clock::now();
  const int status = sluice_->Stop(0, std::chrono::seconds(15));  // signal 0: only waits
  ASSERT_TRUE(WIFEXITED(status)) << status << sluice_->ReadLog();
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THAT(sluice_->ReadLog(),
              HasSubstr("(--wait_for_backend_max_elapsed=3s, "));
  EXPECT_THAT(sluice_->ReadLog(), HasSubstr("has not answered"));
}

// Verifies SIGTERM during the wait drains and stops as at any time (exit status 0), and that
// without upstream's variables and --wait_for_backend health does not wait: healthy at once
// with a Redis that is not there, answering by the failure policy (allow).
TEST_F(StartupHealthE2eTest, NativeHealthDoesNotWaitAndSigtermStopsAWait) {
  const std::string dead_redis = absl::StrCat("--redis_addresses=127.0.0.1:", FreePort());
  Start({}, {"--backend=redis", dead_redis});
  EXPECT_THAT(Healthcheck(), EndsWith("\n200"));
  EXPECT_EQ(Health(), kServing);
  EXPECT_EQ(Decide(), envoy::service::ratelimit::v3::RateLimitResponse::OK);
  ASSERT_TRUE(WIFEXITED(sluice_->Stop(SIGTERM, std::chrono::seconds(15))));

  Start({}, {"--backend=redis", dead_redis, "--wait_for_backend"});
  EXPECT_EQ(Health(), kNotServing);
  const int status = sluice_->Stop(SIGTERM, std::chrono::seconds(15));
  ASSERT_TRUE(WIFEXITED(status)) << status << sluice_->ReadLog();
  EXPECT_EQ(WEXITSTATUS(status), 0) << sluice_->ReadLog();
}

}  // namespace
}  // namespace sluice
