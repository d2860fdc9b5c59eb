// End-to-end: settings the real build/bin/sluice refuses or reports at start. A --grpc_address
// gRPC would misread stops the start naming the flag; an envoyproxy/ratelimit variable is
// credited in the log only with what is in force; a malformed REDIS_URL is named; every bad
// setting is reported at once; --check_config binds nothing.
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::FreePort;
using testing::HeldPort;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

constexpr char kConfig[] =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";

std::string Bin(const std::string& name) { return SluiceServer::BinaryPath(name); }

// Verifies a gRPC port past 65535 stops the start with a message naming the flag, where gRPC
// alone would have served on another port.
TEST(SettingsE2eTest, RefusesGrpcPortOutOfRange) {
  TempDir dir;
  const std::string config = dir.WriteFile("c.yaml", kConfig);
  for (const char* address : {"127.0.0.1:65536", "127.0.0.1:99999"}) {
    auto [status, out] = RunCommand(absl::StrCat(Bin("sluice"), " --config=", config,
                                                 " --http_address=127.0.0.1:0 --grpc_address=",
                                                 address));
    EXPECT_EQ(status, 1) << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("sluice: --grpc_address: '", address, "': port")))
        << out;
  }
}

// Verifies PORT overridden by --http_address is logged as overridden, with the value in force,
// while GRPC_PORT, which nothing overrode, is credited.
TEST(SettingsE2eTest, LogsWhichSettingWon) {
  TempDir dir;
  const std::string config = dir.WriteFile("c.yaml", kConfig);
  const int grpc_port = FreePort();
  const int http_port = FreePort();
  ChildProcess sluice({Bin("sluice"), "--config=" + config,
                       absl::StrCat("--http_address=127.0.0.1:", http_port)},
                      dir.path() + "/sluice.log",
                      {"PORT=1", "GRPC_HOST=127.0.0.1", absl::StrCat("GRPC_PORT=", grpc_port),
                       // Upstream's variables log warnings only by default (its WARN), and
                       // listen on a debug port (0.0.0.0:6070 by default): a loopback one.
                       "LOG_LEVEL=info", "DEBUG_HOST=127.0.0.1",
                       absl::StrCat("DEBUG_PORT=", FreePort())});
  ASSERT_TRUE(WaitForPort(http_port, std::chrono::seconds(20))) << sluice.ReadLog();
  const std::string log = sluice.ReadLog();
  EXPECT_THAT(log, HasSubstr(absl::StrCat("PORT: --http_address=0.0.0.0:1 overridden by the "
                                          "command line (--http_address=127.0.0.1:",
                                          http_port, " in force)")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("--grpc_address=127.0.0.1:", grpc_port,
                                          " from GRPC_HOST, GRPC_PORT")));
}

// Verifies REDIS_URL that is not an address stops the start naming REDIS_URL.
TEST(SettingsE2eTest, MalformedRedisUrlIsNamed) {
  TempDir dir;
  const std::string config = dir.WriteFile("c.yaml", kConfig);
  auto [status, out] = RunCommand(absl::StrCat("REDIS_SOCKET_TYPE=tcp REDIS_URL=garbage ",
                                               Bin("sluice"), " --config=", config));
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("REDIS_URL: 'garbage' is not HOST:PORT"));
}

// Verifies every bad setting stops the start at once, one line each naming its flag, and the
// envoyproxy/ratelimit variable that set a flag involved.
TEST(SettingsE2eTest, ReportsEveryBadSettingAtOnce) {
  TempDir dir;
  const std::string config = dir.WriteFile("c.yaml", kConfig);
  auto [status, out] = RunCommand(absl::StrCat(
      "REDIS_TYPE=cluster REDIS_URL=127.0.0.1:1 SLUICE_REDIS_DB=2 SLUICE_MAX_ENTRIES=lots ",
      Bin("sluice"), " --config=", config,
      " --failure_mode=panic --replicas_hint=0 --grpc_address=127.0.0.1:70000 2>&1"));
  EXPECT_EQ(status, 1) << out;
  for (const char* line :
       {"sluice: environment variable SLUICE_MAX_ENTRIES='lots': Illegal value 'lots' specified "
        "for flag 'max_entries'\n",
        "sluice: --failure_mode: 'panic' is not allow, deny or local\n",
        "sluice: --redis_db: a Redis Cluster has only database 0 (--backend set by REDIS_TYPE)\n",
        "sluice: --replicas_hint must be at least 1\n",
        "sluice: --grpc_address: '127.0.0.1:70000': port '70000' is not a number from 0 to "
        "65535\n"}) {
    EXPECT_THAT(out, HasSubstr(line));
  }
}

// Verifies --check_config validates and prints without serving: it binds neither listener
// (both addresses are taken here) and does not wait for a Redis that is not there.
TEST(SettingsE2eTest, CheckConfigBindsNothing) {
  TempDir dir;
  const std::string config = dir.WriteFile("c.yaml", kConfig);
  const int grpc_port = FreePort();
  const int http_port = FreePort();
  HeldPort grpc(grpc_port);
  HeldPort http(http_port);
  ASSERT_TRUE(grpc.ok() && http.ok());
  const auto start = std::chrono::steady_clock::now();
  auto [status, out] = RunCommand(absl::StrCat(
      Bin("sluice"), " --check_config --config=", config, " --grpc_address=127.0.0.1:",
      grpc_port, " --http_address=127.0.0.1:", http_port,
      " --backend=redis --redis_addresses=127.0.0.1:", FreePort()));
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("config OK: 1 domains, 1 rules, 0 warnings"));
  // A Redis backend waits up to 2 s for its server at start; --check_config builds none.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500)) << out;
}

}  // namespace
}  // namespace sluice
