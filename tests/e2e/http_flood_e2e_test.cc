// End-to-end: the real sluice under a low file-descriptor limit, flooded with HTTP connections
// that send part of a request and stall (a slowloris attack), must keep answering gRPC and
// health checks, stay within its descriptors without a CPU-bound accept loop or a log flood,
// and drop the stalled connections at the request timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
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
#include "tests/e2e/grpc_health.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::FreePort;
using testing::HttpGet;
using testing::MetricValue;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;

constexpr int kFileLimit = 256;     // the server's RLIMIT_NOFILE
constexpr int kConnections = 400;   // the flood: more than the limit

// User plus system CPU time the process has used, from /proc/<pid>/stat.
absl::Duration CpuTime(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ', absl::SkipEmpty());
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InfiniteDuration();
  }
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

// Connects to 127.0.0.1:port and sends the start of a request that never ends; -1 on failure.
int StallingClient(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  const std::string start = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Stall: 1\r\n";
  (void)send(fd, start.data(), start.size(), MSG_NOSIGNAL);
  return fd;
}

// True once the server has closed `fd` (reads EOF or a reset).
bool ClosedByServer(int fd) {
  pollfd ready{fd, POLLIN, 0};
  char buffer[512];
  return poll(&ready, 1, 0) > 0 && recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) <= 0;
}

// Verifies a slowloris flood past the descriptor limit leaves gRPC and /healthz answering,
// with the HTTP connections held to half the limit, no busy loop, a short log, and every
// stalled connection dropped at --http_request_timeout.
TEST(HttpFloodE2eTest, StallingFloodLeavesGrpcAndHealthServing) {
  TempDir dir;
  const std::string config = dir.WriteFile("config/e2e.yaml",
                                           "domain: e2e\ndescriptors:\n  - key: user\n"
                                           "    rate_limit: {unit: hour, requests_per_unit: 5}\n");
  const int grpc_port = FreePort();
  const int http_port = FreePort();
  const std::string grpc_address = absl::StrCat("127.0.0.1:", grpc_port);
  // The limit is set in the child (a shell that lowers it, then execs sluice).
  ChildProcess server(
      {"/bin/sh", "-c", absl::StrCat("ulimit -n ", kFileLimit, " && exec \"$0\" \"$@\""),
       SluiceServer::BinaryPath("sluice"), "--config=" + config, "--grpc_address=" + grpc_address,
       absl::StrCat("--http_address=127.0.0.1:", http_port), "--http_request_timeout=3s"},
      dir.path() + "/sluice.log");
  ASSERT_TRUE(WaitForPort(grpc_port, std::chrono::seconds(20))) << server.ReadLog();
  ASSERT_TRUE(WaitForPort(http_port, std::chrono::seconds(20))) << server.ReadLog();
  const size_t log_offset = server.ReadLog().size();

  std::vector<int> flood;
  for (int i = 0; i < kConnections; ++i) {
    const int fd = StallingClient(http_port);
    ASSERT_GE(fd, 0) << "connection " << i;
    flood.push_back(fd);
  }

  // gRPC decides and reports SERVING, and /healthz answers, all while the flood stands.
  RlsClient client(grpc_address);
  auto request = BuildRequest("e2e", {"user=alice"}, 0);
  ASSERT_TRUE(request.ok());
  auto response = client.ShouldRateLimit(*request, absl::Seconds(5));
  ASSERT_TRUE(response.ok()) << response.status() << "\n" << server.ReadLog();
  EXPECT_EQ(response->overall_code(), RlsResponse::OK);
  EXPECT_EQ(testing::GrpcHealthCheck(grpc_address, ""), std::string("\x08\x01", 2));
  EXPECT_EQ(HttpGet(http_port, "/healthz"), "OK\n\n200");

  // HTTP holds half the descriptors, the oldest stalled connections made room for newer ones,
  // and the process is not spinning.
  const std::string metrics = HttpGet(http_port, "/metrics");
  EXPECT_EQ(MetricValue(metrics, "sluice_http_connections_max"), kFileLimit / 2) << metrics;
  EXPECT_LE(MetricValue(metrics, "sluice_http_connections"), kFileLimit / 2) << metrics;
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "sluice_http_connections_closed_total\\{reason=\"evicted\"\\} "
                           "[1-9][0-9][0-9]\n"));
  const absl::Duration cpu_before = CpuTime(server.pid());
  absl::SleepFor(absl::Seconds(1));
  EXPECT_LT(CpuTime(server.pid()) - cpu_before, absl::Milliseconds(500))
      << "the server is busy while the flood only stalls";

  // Every stalled connection is dropped: evicted, or cut at the 3 s request timeout.
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  size_t closed = 0;
  while (absl::Now() < deadline && closed < flood.size()) {
    closed = 0;
    for (int fd : flood) {
      closed += ClosedByServer(fd) ? 1 : 0;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(closed, flood.size());
  for (int fd : flood) {
    close(fd);
  }

  // A few rate-limited lines, not one per connection or per failed accept.
  const std::string log = server.ReadLog();
  const std::vector<std::string> lines =
      absl::StrSplit(log.substr(log_offset), '\n', absl::SkipEmpty());
  EXPECT_LE(lines.size(), 10u) << log;
  EXPECT_THAT(log, ::testing::Not(HasSubstr("Error from accept() call")));
}

}  // namespace
}  // namespace sluice
