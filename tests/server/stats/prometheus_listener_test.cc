#include "server/stats/prometheus_listener.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::RunCommand;

// "<headers and body>\n<status>" of `method` on the listener's `path` (curl).
std::string Curl(int port, const std::string& method, const std::string& path) {
  return RunCommand(absl::StrCat("curl -s -i -o - -w '\\n%{http_code}' -X ", method,
                                 method == "HEAD" ? " -I" : "", " http://127.0.0.1:", port, path))
      .second;
}

// Verifies the configured path answers GET with the page, scrapes in the same second sharing
// one render, HEAD with headers only, another method with 405, and any other path with 404
// without rendering.
TEST(PrometheusListenerTest, ServesOnePathRenderedOncePerSecond) {
  std::atomic<int> renders{0};
  PrometheusListener listener("/stats/prometheus", [&renders] {
    return absl::StrCat("scrape ", ++renders, "\n");
  });
  ASSERT_TRUE(listener.Start("127.0.0.1:0").ok());
  const int port = listener.port();
  ASSERT_GT(port, 0);

  std::string get = Curl(port, "GET", "/stats/prometheus?x=1");
  EXPECT_THAT(get, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(get, EndsWith("scrape 1\n\n200"));
  EXPECT_THAT(Curl(port, "GET", "/stats/prometheus"), EndsWith("scrape 1\n\n200"));
  EXPECT_THAT(Curl(port, "HEAD", "/stats/prometheus"), HasSubstr("Content-Length: 9"));
  EXPECT_THAT(Curl(port, "POST", "/stats/prometheus"), EndsWith("405"));
  EXPECT_THAT(Curl(port, "GET", "/metrics"), EndsWith("404"));
  EXPECT_LE(renders.load(), 2);  // a second may have passed between the scrapes, not more
  listener.Stop();
  listener.Stop();  // idempotent
}

// Verifies an address that cannot be bound is an error naming --prometheus_address.
TEST(PrometheusListenerTest, BindErrorNamesTheFlag) {
  PrometheusListener first("/metrics", [] { return std::string(); });
  ASSERT_TRUE(first.Start("127.0.0.1:0").ok());
  PrometheusListener second("/metrics", [] { return std::string(); });
  const absl::Status status = second.Start(absl::StrCat("127.0.0.1:", first.port()));
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("--prometheus_address=127.0.0.1:"));
}

}  // namespace
}  // namespace sluice
