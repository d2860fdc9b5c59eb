// End-to-end: envoyproxy/ratelimit's debug port and log level on the real build/bin/sluice under
// upstream's variables. Upstream always listens on DEBUG_HOST:DEBUG_PORT (0.0.0.0:6070 by
// default; server_impl.go's Start), lists its endpoints at / and serves /rlconfig there, and
// only logs a failure to listen; its LOG_LEVEL defaults to WARN (settings.go). The default
// address itself (0.0.0.0:6070, not loopback) is checked by upstream_env_test; here the port is
// a loopback one.
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ChildProcess;
using testing::FreePort;
using testing::HeldPort;
using testing::HttpGet;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

constexpr char kConfig[] =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 7}\n";

class DebugPortE2eTest : public ::testing::Test {
 protected:
  // Starts sluice with upstream's listener variables (the debug port `debug_port`) and no
  // LOG_LEVEL; waits for the HTTP port.
  void Start(int debug_port) {
    http_port_ = FreePort();
    sluice_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{SluiceServer::BinaryPath("sluice"),
                                 "--config=" + dir_.WriteFile("c.yaml", kConfig)},
        dir_.path() + "/sluice.log",
        std::vector<std::string>{"HOST=127.0.0.1", absl::StrCat("PORT=", http_port_),
                                 "GRPC_HOST=127.0.0.1", absl::StrCat("GRPC_PORT=", FreePort()),
                                 "DEBUG_HOST=127.0.0.1", absl::StrCat("DEBUG_PORT=", debug_port),
                                 "USE_STATSD=false"});
    ASSERT_TRUE(WaitForPort(http_port_, std::chrono::seconds(20))) << sluice_->ReadLog();
  }

  TempDir dir_;
  int http_port_ = 0;
  std::unique_ptr<ChildProcess> sluice_;
};

// Verifies the debug port lists its endpoints at / in upstream's "path: help" form, /rlconfig
// among them with upstream's help text, and serves the config at /rlconfig.
TEST_F(DebugPortE2eTest, ListsItsEndpointsAndServesTheConfig) {
  const int debug_port = FreePort();
  Start(debug_port);
  ASSERT_TRUE(WaitForPort(debug_port, std::chrono::seconds(5))) << sluice_->ReadLog();
  const std::string index = HttpGet(debug_port, "/");
  EXPECT_THAT(index, EndsWith("\n200"));
  EXPECT_THAT(index,
              HasSubstr("/rlconfig: print out the currently loaded configuration for debugging\n"));
  EXPECT_THAT(index, HasSubstr("/metrics: "));
  const std::string config = HttpGet(debug_port, "/rlconfig");
  EXPECT_THAT(config, EndsWith("\n200"));
  EXPECT_THAT(config, HasSubstr("d.k"));
}

// Verifies a debug port Sluice cannot listen on is only logged, as upstream logs it: the start
// goes on and the HTTP port serves; and that with LOG_LEVEL unset the log holds warnings only
// (upstream's WARN), not the info lines of the start.
TEST_F(DebugPortE2eTest, DebugPortTakenIsOnlyLoggedAndLogsAreWarnings) {
  const int debug_port = FreePort();
  HeldPort held(debug_port);
  ASSERT_TRUE(held.ok());
  Start(debug_port);
  EXPECT_THAT(HttpGet(http_port_, "/rlconfig"), EndsWith("\n200"));
  const std::string log = sluice_->ReadLog();
  EXPECT_THAT(log, HasSubstr(absl::StrCat(
                       "serving without the debug address: --debug_address=127.0.0.1:",
                       debug_port, ": cannot listen")));
  EXPECT_THAT(log, Not(HasSubstr("sluice serving:")));
  EXPECT_THAT(log, Not(HasSubstr("envoyproxy/ratelimit setting: ")));
}

}  // namespace
}  // namespace sluice
