// End-to-end migration from envoyproxy/ratelimit: the real build/bin/sluice started with no
// flags at all, only the environment variables an envoyproxy/ratelimit Deployment sets, and
// its config laid out as a RUNTIME_ROOT tree mounted from a Kubernetes ConfigMap (files reached
// through a ..data symlink that a config change swaps). On the memory backend, on Redis and on
// memcached.
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/memcached/server_placement.h"
#include "tests/e2e/grpc_health.h"
#include "tests/support/process.h"
#include "tests/support/certificates.h"
#include "tests/support/memcached_server.h"
#include "tests/support/redis_sentinel.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::FreePort;
using testing::HttpGet;
using testing::MemcachedServer;
using testing::RedisServer;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

std::string Config(int per_minute) {
  return absl::StrCat(R"(domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: )",
                      per_minute, R"(
  - key: path
    value: "/api/*"
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: internal
    rate_limit:
      unlimited: true
)");
}

class MigrationE2eTest : public ::testing::Test {
 protected:
  // Lays out RUNTIME_ROOT/ratelimit/config as a ConfigMap mount with `yaml` as config.yaml.
  void WriteConfigMap(const std::string& yaml, const std::string& version) {
    namespace fs = std::filesystem;
    const fs::path config_dir = fs::path(dir_.path()) / "runtime/ratelimit/config";
    const fs::path data = config_dir / ("..v" + version);
    fs::create_directories(data);
    dir_.WriteFile(("runtime/ratelimit/config/..v" + version + "/config.yaml"), yaml);
    // Kubernetes swaps ..data atomically with a rename of a fresh symlink.
    const fs::path next = config_dir / "..data_tmp";
    fs::remove(next);
    fs::create_directory_symlink("..v" + version, next);
    fs::rename(next, config_dir / "..data");
    if (!fs::is_symlink(config_dir / "config.yaml")) {
      fs::create_symlink("..data/config.yaml", config_dir / "config.yaml");
    }
  }

  // Starts sluice with no flags and upstream's variables plus `extra`.
  void Start(std::vector<std::string> extra) {
    grpc_port_ = FreePort();
    http_port_ = FreePort();
    debug_port_ = FreePort();
    std::vector<std::string> env = {
        absl::StrCat("RUNTIME_ROOT=", dir_.path(), "/runtime"),
        "RUNTIME_SUBDIRECTORY=ratelimit",
        "RUNTIME_WATCH_ROOT=false",
        "RUNTIME_IGNOREDOTFILES=true",
        "HOST=127.0.0.1",
        absl::StrCat("PORT=", http_port_),
        "GRPC_HOST=127.0.0.1",
        absl::StrCat("GRPC_PORT=", grpc_port_),
        "DEBUG_HOST=127.0.0.1",
        absl::StrCat("DEBUG_PORT=", debug_port_),
        "LOG_LEVEL=debug",
        "LOG_FORMAT=json",
        "USE_STATSD=false",
        "LIMIT_RESPONSE_HEADERS_ENABLED=true",
    };
    env.insert(env.end(), extra.begin(), extra.end());
    server_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{SluiceServer::BinaryPath("sluice")},
        absl::StrCat(dir_.path(), "/sluice.log"), env);
    for (int port : {grpc_port_, http_port_, debug_port_}) {
      ASSERT_TRUE(WaitForPort(port, std::chrono::seconds(20))) << server_->ReadLog();
    }
    client_ = std::make_unique<RlsClient>(absl::StrCat("127.0.0.1:", grpc_port_));
  }

  RlsResponse Check(const std::string& descriptor, bool refund = false) {
    auto request = BuildRequest("edge", {descriptor}, 0);
    EXPECT_TRUE(request.ok()) << request.status();
    request->mutable_descriptors(0)->set_is_negative_hits(refund);
    auto response = client_->ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : RlsResponse();
  }

  static std::string Header(const RlsResponse& response, absl::string_view name) {
    for (const auto& header : response.response_headers_to_add()) {
      if (header.key() == name) {
        return header.value();
      }
    }
    return "absent";
  }

  std::string Health(const std::string& service) {
    return testing::GrpcHealthCheck(absl::StrCat("127.0.0.1:", grpc_port_), service);
  }

  // The decisions and endpoints every backend must give the same way.
  void ExpectUpstreamBehaviour() {
    // The per-minute window is aligned to the clock: start with at least 5 s of the minute left,
    // so that it cannot end between the checks, nor before a test reads the key they wrote
    // (a CI run once read it just after its window expired).
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto into_minute = std::chrono::duration_cast<std::chrono::milliseconds>(now) %
                             std::chrono::minutes(1);
    if (into_minute > std::chrono::seconds(55)) {
      std::this_thread::sleep_for(std::chrono::minutes(1) - into_minute +
                                  std::chrono::milliseconds(50));
    }
    // A per-minute limit of 2, with upstream's RateLimit-* headers.
    RlsResponse first = Check("remote_address=10.0.0.1");
    EXPECT_EQ(first.overall_code(), RlsResponse::OK);
    EXPECT_EQ(Header(first, "RateLimit-Limit"), "2");
    EXPECT_EQ(Header(first, "RateLimit-Remaining"), "1");
    EXPECT_EQ(Check("remote_address=10.0.0.1").overall_code(), RlsResponse::OK);
    RlsResponse over = Check("remote_address=10.0.0.1");
    EXPECT_EQ(over.overall_code(), RlsResponse::OVER_LIMIT);
    EXPECT_EQ(Header(over, "RateLimit-Remaining"), "0");
    // Refunds (is_negative_hits), answered OK as upstream's #1140 answers them. Upstream's
    // environment charges fixed windows always, so the denial above was counted: the first
    // refund repays it, the second frees one request.
    RlsResponse repaid = Check("remote_address=10.0.0.1", /*refund=*/true);
    EXPECT_EQ(repaid.overall_code(), RlsResponse::OK);
    EXPECT_EQ(repaid.statuses(0).limit_remaining(), 0u);
    EXPECT_EQ(Check("remote_address=10.0.0.1", /*refund=*/true).statuses(0).limit_remaining(), 1u);
    EXPECT_EQ(Check("remote_address=10.0.0.1").overall_code(), RlsResponse::OK);
    // share_threshold: every /api/* path shares one hourly counter of 3.
    for (const char* path : {"path=/api/a", "path=/api/b", "path=/api/c"}) {
      EXPECT_EQ(Check(path).overall_code(), RlsResponse::OK) << path;
    }
    EXPECT_EQ(Check("path=/api/d").overall_code(), RlsResponse::OVER_LIMIT);
    // Unlimited: OK with upstream's remaining of 2^32 - 1.
    RlsResponse unlimited = Check("internal=job");
    EXPECT_EQ(unlimited.overall_code(), RlsResponse::OK);
    EXPECT_EQ(unlimited.statuses(0).limit_remaining(), 4294967295u);

    // Health as upstream's probes ask for it, on gRPC and HTTP.
    const std::string serving("\x08\x01", 2);
    EXPECT_EQ(Health("ratelimit"), serving);
    EXPECT_EQ(Health(""), serving);
    EXPECT_EQ(Health("envoy.service.ratelimit.v3.RateLimitService"), serving);
    EXPECT_EQ(HttpGet(http_port_, "/healthcheck"), "OK\n200");
    // The debug port serves the loaded config.
    EXPECT_THAT(HttpGet(debug_port_, "/rlconfig"), HasSubstr("edge.remote_address: "));
    // LOG_FORMAT=json: every line is a JSON object.
    const std::string log = server_->ReadLog();
    ASSERT_FALSE(log.empty());
    EXPECT_EQ(log[0], '{') << log;
    EXPECT_THAT(log, HasSubstr("\"@message\":"));
  }

  // Swaps the ConfigMap to a per-minute limit of 5 and waits until a fresh client sees it.
  void ExpectReloadOnSymlinkSwap() {
    WriteConfigMap(Config(5), "2");
    bool reloaded = false;
    for (int i = 0; i < 150 && !reloaded; ++i) {
      RlsResponse r = Check(absl::StrCat("remote_address=10.9.0.", i));
      reloaded = r.statuses_size() == 1 && r.statuses(0).current_limit().requests_per_unit() == 5;
      if (!reloaded) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    EXPECT_TRUE(reloaded) << server_->ReadLog();
  }

  TempDir dir_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  int debug_port_ = 0;
  std::unique_ptr<ChildProcess> server_;
  std::unique_ptr<RlsClient> client_;
};

// Verifies an envoyproxy/ratelimit-style environment alone starts Sluice on the memory backend
// (no Redis variable set), answers as upstream does, and reloads on a ConfigMap swap.
TEST_F(MigrationE2eTest, UpstreamEnvironmentOnMemoryBackend) {
  WriteConfigMap(Config(2), "1");
  Start({});
  ExpectUpstreamBehaviour();
  EXPECT_THAT(server_->ReadLog(), HasSubstr("backend memory"));
  ExpectReloadOnSymlinkSwap();
}

// Verifies upstream's charging (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT unset: every hit, admitted
// or not) is applied to fixed windows only, the one algorithm upstream has: a token bucket of
// 10/s (burst 5) asked 40 times a second for 1.5 s keeps admitting at its rate, where charged
// always it would stay in debt and admit its burst and little more.
TEST_F(MigrationE2eTest, UpstreamChargingIsForFixedWindowsOnly) {
  WriteConfigMap(R"(domain: edge
descriptors:
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 5}
)",
                 "1");
  Start({});
  int admitted = 0;
  auto next = std::chrono::steady_clock::now();
  for (int i = 0; i < 60; ++i) {
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(25);
    if (Check("tb=shared").overall_code() == RlsResponse::OK) ++admitted;
  }
  // Charged only if admitted: the burst plus about 15 refilled; charged always: about 5.
  EXPECT_GE(admitted, 12);
  EXPECT_LE(admitted, 5 + 10 * 2);
  EXPECT_THAT(server_->ReadLog(), HasSubstr("default_charge_fixed_window=always"));
}

// Verifies the same with upstream's memcache variables (BACKEND_TYPE=memcache and two servers in
// MEMCACHE_HOST_PORT): the limits live in memcached under upstream's own keys (no
// CACHE_KEY_PREFIX: no prefix), each on the server upstream's client places it on, so that an
// increment an upstream replica makes there (gomemcache's `incr`) is counted by Sluice too.
TEST_F(MigrationE2eTest, UpstreamEnvironmentOnMemcached) {
  std::vector<std::unique_ptr<MemcachedServer>> servers;
  for (int i = 0; i < 2; ++i) {
    auto server = MemcachedServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    servers.push_back(std::move(*server));
  }
  WriteConfigMap(Config(2), "1");
  // Sluice's own variable for the budget (upstream's have none): a first call past the 10 ms
  // default on a loaded machine is answered by the failure mode (allow, remaining 0).
  Start({"BACKEND_TYPE=memcache",
         absl::StrCat("MEMCACHE_HOST_PORT=", servers[0]->address(), ",", servers[1]->address()),
         "MEMCACHE_MAX_IDLE_CONNS=3", "SLUICE_REDIS_TIMEOUT=500ms"});
  ExpectUpstreamBehaviour();
  EXPECT_THAT(server_->ReadLog(), HasSubstr("backend memcached"));
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  // Upstream's increment-first: the denied third request counted (3), two refunds (1), one more
  // request (2).
  const std::string window = absl::StrCat("edge_remote_address_10.0.0.1_", now_s / 60 * 60);
  MemcachedServer& home = *servers[PickServer(window, 2)];
  EXPECT_EQ(home.Count(window), 2);
  EXPECT_EQ(servers[1 - PickServer(window, 2)]->Count(window), -1);
  // The one shared counter of /api/*: three admitted and the denied fourth, charged.
  const std::string shared = absl::StrCat("edge_path_/api/*_", now_s / 3600 * 3600);
  EXPECT_EQ(servers[PickServer(shared, 2)]->Count(shared), 4);
  // An upstream replica's increment of the same window is Sluice's too: now over the limit.
  auto incremented = home.Command(absl::StrCat("incr ", window, " 1\r\n"), "\r\n");
  ASSERT_TRUE(incremented.ok()) << incremented.status();
  EXPECT_EQ(*incremented, "3\r\n");
  EXPECT_EQ(Check("remote_address=10.0.0.1").overall_code(), RlsResponse::OVER_LIMIT);
  EXPECT_GT(testing::MetricValue(HttpGet(http_port_, "/metrics"),
                                 absl::StrCat("sluice_memcached_connections{node=\"",
                                              servers[0]->address(), "\"}")),
            0);
  ExpectReloadOnSymlinkSwap();
}

// Verifies the same with upstream's Redis variables: the limits live in that Redis, in upstream's
// own keys (<CACHE_KEY_PREFIX><domain>_<key>_<value>_<window start>), so that upstream's replicas
// on the same Redis share them.
TEST_F(MigrationE2eTest, UpstreamEnvironmentOnRedis) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfigMap(Config(2), "1");
  Start({"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=SINGLE", "REDIS_POOL_SIZE=2",
         absl::StrCat("REDIS_URL=", (*redis)->address()), "CACHE_KEY_PREFIX=migrated_",
         "SLUICE_REDIS_TIMEOUT=500ms"});
  ExpectUpstreamBehaviour();
  EXPECT_THAT(server_->ReadLog(), HasSubstr("backend redis"));
  auto keys = (*redis)->Command({"KEYS", "migrated_*"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, HasSubstr("migrated_edge_remote_address_10.0.0.1_"));
  EXPECT_THAT(*keys, HasSubstr("migrated_edge_path_/api/*_"));  // the one shared counter
  // Upstream's increment-first (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT unset): the denied third
  // request of 10.0.0.1 was counted too (3), then two refunds (1) and one more request (2).
  auto window = (*redis)->Command({"KEYS", "migrated_edge_remote_address_10.0.0.1_*"});
  ASSERT_TRUE(window.ok()) << window.status();
  auto count = (*redis)->Command({"GET", *window});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, "2");
  ExpectReloadOnSymlinkSwap();
}

// Verifies Envoy Gateway's Redis TLS environment (REDIS_TLS=true and the client certificate it
// mounts at /redis-certs, here in a directory of the test's own) against a Redis that requires
// client certificates; the CA comes from REDIS_TLS_CACERT, as a user adds it to the rate-limit
// deployment's env when the Redis certificate is not from a public CA.
TEST_F(MigrationE2eTest, EnvoyGatewayRedisTlsEnvironment) {
  const std::string certs = dir_.path() + "/redis-certs";
  ASSERT_EQ(testing::RunCommand("mkdir -p " + certs).first, 0);
  ASSERT_TRUE(testing::MakeCa(certs, "ca").ok());
  ASSERT_TRUE(testing::MakeCert(certs, "redis", "ca").ok());
  ASSERT_TRUE(testing::MakeClientCert(certs, "tls", "ca").ok());
  testing::RedisServerOptions options;
  options.tls = {.enabled = true,
                 .cert_file = certs + "/redis.crt",
                 .key_file = certs + "/redis.key",
                 .ca_file = certs + "/ca.crt",
                 .client_auth = testing::RedisServerTlsOptions::ClientAuth::kYes};
  auto redis = RedisServer::Start(options);
  ASSERT_TRUE(redis.ok()) << redis.status();
  WriteConfigMap(Config(2), "1");
  Start({"REDIS_SOCKET_TYPE=tcp", absl::StrCat("REDIS_URL=", (*redis)->tls_address()),
         "REDIS_TLS=true", absl::StrCat("REDIS_TLS_CLIENT_CERT=", certs, "/tls.crt"),
         absl::StrCat("REDIS_TLS_CLIENT_KEY=", certs, "/tls.key"),
         absl::StrCat("REDIS_TLS_CACERT=", certs, "/ca.crt")});
  ExpectUpstreamBehaviour();
  auto keys = (*redis)->Command({"KEYS", "*remote_address_10.0.0.1_*"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, HasSubstr("edge_remote_address_10.0.0.1_"));
}

// Verifies upstream's Sentinel form, REDIS_TYPE=sentinel with REDIS_URL=<master>,<sentinels>:
// decisions go to the master the sentinels name.
TEST_F(MigrationE2eTest, UpstreamSentinelEnvironment) {
  auto deployment = testing::RedisSentinelDeployment::Start({});
  ASSERT_TRUE(deployment.ok()) << deployment.status();
  WriteConfigMap(Config(2), "1");
  Start({"REDIS_TYPE=sentinel",
         absl::StrCat("REDIS_URL=", (*deployment)->master_name(), ",",
                      absl::StrJoin((*deployment)->SentinelAddresses(), ","))});
  ExpectUpstreamBehaviour();
  auto keys = (*deployment)->master()->Command({"KEYS", "*remote_address_10.0.0.1_*"});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, HasSubstr("edge_remote_address_10.0.0.1_"));
}

// Verifies a Sentinel URL without sentinels (upstream panics on it) stops the start with a
// message naming the variables and the form expected.
TEST_F(MigrationE2eTest, RefusesSentinelUrlWithoutSentinels) {
  WriteConfigMap(Config(2), "1");
  ChildProcess sluice({SluiceServer::BinaryPath("sluice")}, absl::StrCat(dir_.path(), "/s.log"),
                      {absl::StrCat("RUNTIME_ROOT=", dir_.path(), "/runtime"),
                       "RUNTIME_SUBDIRECTORY=ratelimit", "REDIS_TYPE=sentinel",
                       "REDIS_URL=mymaster"});
  const int status = sluice.Stop(0, std::chrono::seconds(10));
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(sluice.ReadLog(),
              HasSubstr("REDIS_URL: with REDIS_TYPE=sentinel, expected the master's name and then "
                        "the sentinels, <master name>,<sentinel1>,...,<sentinelN>"));
}

}  // namespace
}  // namespace sluice
