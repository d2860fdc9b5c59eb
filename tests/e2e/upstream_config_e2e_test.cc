// End-to-end: a config envoyproxy/ratelimit loads, the real build/bin/sluice loads. One of
// upstream's keys out of place (shadow_mode under rate_limit:, which upstream's yaml.v2 drops)
// passes --check_config and starts the server with a warning naming file, line and key, and is
// ignored as upstream ignores it; --strict_config refuses the same file. A `*` in a key matches
// the request's "key_value" as upstream's GetLimit matches it.
#include <memory>
#include <string>

#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;

// Line 7 puts shadow_mode in the rule, where upstream ignores it: the rule is enforced.
constexpr char kUpstreamConfig[] = R"(domain: up
descriptors:
  - key: user_*
    rate_limit:
      unit: hour
      requests_per_unit: 1
      shadow_mode: true
)";

constexpr char kWarning[] =
    "up.yaml:7: descriptors[0].rate_limit.shadow_mode: ignored: not a key of a rate limit "
    "(shadow_mode belongs on a descriptor), as envoyproxy/ratelimit ignores it here "
    "(--strict_config refuses it)";

std::string Bin(const std::string& name) { return SluiceServer::BinaryPath(name); }

// Verifies --check_config passes the file with the warning, and refuses it with
// --strict_config, naming file, line and key both times.
TEST(UpstreamConfigE2eTest, CheckConfigWarnsAndStrictConfigRefuses) {
  TempDir dir;
  const std::string file = dir.WriteFile("up.yaml", kUpstreamConfig);
  auto [status, out] = RunCommand(Bin("sluice") + " --check_config --config=" + file);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("config OK: 1 domains, 1 rules, 1 warnings"));
  EXPECT_THAT(out, HasSubstr("warning: " + dir.path() + "/" + kWarning));
  auto [strict, strict_out] =
      RunCommand(Bin("sluice") + " --check_config --strict_config --config=" + file);
  EXPECT_EQ(strict, 1) << strict_out;
  EXPECT_THAT(strict_out, HasSubstr(file + ":7: descriptors[0].rate_limit.shadow_mode: not a "
                                           "key of a rate limit"));
}

// Verifies the server starts on that file, logs the warning, enforces the rule (no shadow
// mode), and matches the wildcard key against "key_value": user=alice and user_id=7 each get
// their one request an hour.
TEST(UpstreamConfigE2eTest, ServesTheFileAsUpstreamReadsIt) {
  TempDir dir;
  dir.WriteFile("config/up.yaml", kUpstreamConfig);
  auto started = SluiceServer::Start(dir.path() + "/config", {}, dir.path());
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<SluiceServer> sluice = std::move(*started);
  RlsClient client(sluice->grpc_address());
  auto code = [&](const std::string& entry) {
    auto request = BuildRequest("up", {entry}, 0);
    EXPECT_TRUE(request.ok());
    auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->overall_code() : RlsResponse::UNKNOWN;
  };
  EXPECT_EQ(code("user=alice"), RlsResponse::OK);
  EXPECT_EQ(code("user=alice"), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(code("user_id=7"), RlsResponse::OK);
  EXPECT_EQ(code("user_id=7"), RlsResponse::OVER_LIMIT);
  EXPECT_EQ(code("group=g"), RlsResponse::OK);
  EXPECT_EQ(code("group=g"), RlsResponse::OK);
  EXPECT_THAT(sluice->ReadLog(), HasSubstr(kWarning));
}

}  // namespace
}  // namespace sluice
