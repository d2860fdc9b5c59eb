// End-to-end: what a caller can make the metrics cost the real build/bin/sluice (issue 41's
// findings 1, 4 and 5). Requests with a limit override and a 1 KB value per descriptor make one
// per-rule series per value, up to the cap; then clients that ask for the metrics and never read
// their answer hold connections on both listeners. The process must stay small, keep answering
// health checks and decisions, and serve a real scraper on each listener.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sanitizers.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::FreePort;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

constexpr int kRequests = 170;
constexpr int kDescriptorsEach = 60;  // 10,200 values: past the 10,000-series cap
constexpr int kStalledScrapers = 40;  // on each listener
// The issue's bound on the server's peak RSS. Under AddressSanitizer (the server is built like
// this test) freed memory waits in a 256 MB quarantine and every allocation has red zones: the
// bound there still tells 1.2 GB of page copies from a shared page.
constexpr int64_t kMaxPeakMb = SLUICE_TEST_ASAN ? 1024 : 256;

int Connect(int port) { return testing::ConnectToLoopback(port); }

bool SendAll(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads one answer (head and Content-Length body) within `timeout`: "<status line>\n<body>",
// or "" if none came whole.
std::string ReadAnswer(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string in;
  size_t whole = std::string::npos;
  char buffer[64 << 10];
  while (absl::Now() < deadline && (whole == std::string::npos || in.size() < whole)) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 50) <= 0) {
      continue;
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      break;
    }
    in.append(buffer, static_cast<size_t>(n));
    const size_t head_end = in.find("\r\n\r\n");
    if (whole == std::string::npos && head_end != std::string::npos) {
      size_t length = 0;
      const size_t at = in.find("Content-Length: ");
      if (at != std::string::npos && at < head_end) {
        length = std::stoul(in.substr(at + 16));
      }
      whole = head_end + 4 + length;
    }
  }
  if (whole == std::string::npos || in.size() < whole) {
    return "";
  }
  return absl::StrCat(in.substr(0, in.find("\r\n")), "\n", in.substr(in.find("\r\n\r\n") + 4));
}

// GET `path` on a fresh connection; the answer as ReadAnswer gives it, and how long it took.
std::pair<std::string, absl::Duration> TimedGet(int port, const std::string& path) {
  const absl::Time start = absl::Now();
  const int fd = Connect(port);
  std::string answer;
  if (fd >= 0 && SendAll(fd, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n\r\n"))) {
    answer = ReadAnswer(fd, absl::Seconds(30));
  }
  if (fd >= 0) {
    close(fd);
  }
  return {answer, absl::Now() - start};
}

// A /proc/<pid>/status field in kB, or -1.
int64_t StatusKb(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field + ":")) {
      int64_t kb = -1;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) {
        return kb;
      }
    }
  }
  return -1;
}

// The value of the unlabelled series `name` in Prometheus text, or -1.
double Gauge(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

class MetricsFloodE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.WriteFile("config/flood.yaml",
                   "domain: flood\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, "
                   "requests_per_unit: 100}\n");
    prometheus_port_ = FreePort();
    auto started = SluiceServer::Start(
        dir_.path() + "/config",
        {absl::StrCat("--prometheus_address=127.0.0.1:", prometheus_port_)}, dir_.path());
    ASSERT_TRUE(started.ok()) << started.status();
    sluice_ = std::move(*started);
    ASSERT_TRUE(WaitForPort(prometheus_port_, std::chrono::seconds(10)));
  }

  // The report's flood: each request's descriptors carry a limit override and a 1 KB value of
  // their own, sent over one keep-alive connection.
  void Flood() {
    const int fd = Connect(sluice_->http_port());
    ASSERT_GE(fd, 0);
    const std::string filler(1000, 'v');
    for (int r = 0; r < kRequests; ++r) {
      std::string body = R"({"domain":"flood","descriptors":[)";
      for (int d = 0; d < kDescriptorsEach; ++d) {
        absl::StrAppend(&body, d == 0 ? "" : ",", R"({"entries":[{"key":"user","value":")",
                        r, "_", d, "_", filler,
                        R"("}],"limit":{"requests_per_unit":5,"unit":"HOUR"}})");
      }
      body += "]}";
      ASSERT_TRUE(SendAll(fd, absl::StrCat("POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: ",
                                           body.size(), "\r\n\r\n", body)));
      ASSERT_THAT(ReadAnswer(fd, absl::Seconds(10)), HasSubstr("200 OK"));
    }
    close(fd);
  }

  TempDir dir_;
  int prometheus_port_ = 0;
  std::unique_ptr<SluiceServer> sluice_;
};

// Verifies the per-rule series a caller makes are bounded in number and label bytes, and that
// 40 clients per listener that ask for the metrics and never read cannot grow the process past
// 256 MB, delay health checks, stop decisions or lock a real scraper out of either listener.
TEST_F(MetricsFloodE2eTest, StalledScrapersOfAFloodedPageCostLittle) {
  Flood();
  const pid_t pid = sluice_->process().pid();
  auto [page, page_time] = TimedGet(sluice_->http_port(), "/metrics");
  ASSERT_THAT(page, HasSubstr("200 OK"));
  EXPECT_GE(Gauge(page, "sluice_rule_series"), 9000);
  EXPECT_LE(Gauge(page, "sluice_rule_series"), 10000);
  EXPECT_LE(page.size(), size_t{16} << 20);
  // No label value longer than the stat key bound (a key, its quotes and the family's name).
  size_t longest = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::StartsWith(line, "sluice_rule_total_hits{")) {
      longest = std::max(longest, line.size());
    }
  }
  EXPECT_LE(longest, 256u + 64u);

  std::vector<int> stalled;
  for (int port : {sluice_->http_port(), prometheus_port_}) {
    for (int i = 0; i < kStalledScrapers; ++i) {
      const int fd = Connect(port);
      if (fd >= 0 && SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")) {
        stalled.push_back(fd);
      }
    }
  }
  // Every scraper has its answer begun (or was refused or closed at the cap): the page is
  // rendered, which under a sanitizer takes seconds. Then the answers stall; a second is the
  // grace after which the Prometheus listener, at its cap, closes one to make room.
  for (int fd : stalled) {
    pollfd ready{fd, POLLIN, 0};
    ASSERT_EQ(poll(&ready, 1, 30000), 1) << "a scraper got no answer in 30 s";
  }
  absl::SleepFor(absl::Seconds(2));

  absl::Duration slowest_health = absl::ZeroDuration();
  for (int i = 0; i < 20; ++i) {
    auto [health, took] = TimedGet(sluice_->http_port(), "/healthcheck");
    EXPECT_EQ(health, "HTTP/1.1 200 OK\nOK");
    slowest_health = std::max(slowest_health, took);
  }
  RlsClient client(sluice_->grpc_address());
  for (int i = 0; i < 20; ++i) {
    auto request = BuildRequest("flood", {absl::StrCat("user=real_", i)}, 0);
    ASSERT_TRUE(request.ok()) << request.status();
    auto answer = client.ShouldRateLimit(*request, absl::Seconds(5));
    ASSERT_TRUE(answer.ok()) << answer.status();
  }
  auto [scrape, scrape_time] = TimedGet(sluice_->http_port(), "/metrics");
  EXPECT_THAT(scrape, HasSubstr("200 OK"));
  auto [upstream, upstream_time] = TimedGet(prometheus_port_, "/metrics");
  EXPECT_THAT(upstream, HasSubstr("200 OK"));
  EXPECT_THAT(upstream, HasSubstr("ratelimit_service_rate_limit_total_hits"));
  const int64_t peak_kb = StatusKb(pid, "VmHWM");
  std::cout << "metrics flood: page " << page.size() << " bytes rendered and read in "
            << absl::FormatDuration(page_time) << "; with " << stalled.size()
            << " stalled scrapers: slowest /healthcheck of 20 "
            << absl::FormatDuration(slowest_health) << ", a scrape "
            << absl::FormatDuration(scrape_time) << ", upstream's page "
            << absl::FormatDuration(upstream_time) << "; sluice VmHWM " << peak_kb / 1024
            << " MB\n";
  // Health checks are not starved (the report: 22 s, then the connection closed); judged with
  // a margin for a loaded machine, the figure above is what to read.
  EXPECT_LT(slowest_health, absl::Seconds(2));
  EXPECT_GT(peak_kb, 0);
  EXPECT_LT(peak_kb, kMaxPeakMb * 1024);
  for (int fd : stalled) {
    close(fd);
  }
}

}  // namespace
}  // namespace sluice
