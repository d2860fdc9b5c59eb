#include "server/service/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "tests/support/fake_clock.h"
#include "server/config/config_loader.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using testing::HttpGet;

class HttpServerTest : public ::testing::Test {
 protected:
  void Serve(std::shared_ptr<const Config> config, HttpServerOptions options,
             const std::string& debug_address = "") {
    store_ = std::make_unique<ConfigStore>(std::move(config));
    limiter_ =
        std::make_unique<RateLimiter>(*store_, backend_, clock_, metrics_, RateLimiterOptions());
    http_ = std::make_unique<HttpServer>(*limiter_, *store_, backend_, metrics_, options);
    ASSERT_TRUE(http_->Start("127.0.0.1:0", debug_address).ok());
  }

  static std::shared_ptr<const Config> Load(const std::string& yaml) {
    auto config = LoadConfigText("h.yaml", yaml);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  FakeClock clock_{1700006400000000};
  MemoryBackend backend_{clock_};
  Metrics metrics_;
  std::unique_ptr<ConfigStore> store_;
  std::unique_ptr<RateLimiter> limiter_;
  std::unique_ptr<HttpServer> http_;
};

// Verifies /healthcheck answers as envoyproxy/ratelimit's: "OK" and 200, then 500 once draining,
// while /healthz answers 503.
TEST_F(HttpServerTest, HealthcheckIs500WhileDraining) {
  Serve(Load("domain: h\n"), {});
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "OK\n200");
  http_->SetDraining();
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "draining\n\n500");
  EXPECT_EQ(HttpGet(http_->port(), "/healthz"), "draining\n\n503");
}

// Verifies /readyz says how many decisions fell to the failure policy, by reason.
TEST_F(HttpServerTest, ReadyzCountsFailurePolicyDecisionsByReason) {
  Serve(Load("domain: h\n"), {});
  EXPECT_EQ(HttpGet(http_->port(), "/readyz"), "OK\n\n200");
  metrics_.CountBackendFailure(FailureReason::kCircuitOpen);
  metrics_.CountBackendFailure(FailureReason::kCircuitOpen);
  metrics_.CountBackendFailure(FailureReason::kTimeoutInFlight);
  EXPECT_EQ(HttpGet(http_->port(), "/readyz"),
            "OK\nfailure policy decisions: timeout_in_flight=1 circuit_open=2\n\n200");
  EXPECT_THAT(HttpGet(http_->port(), "/metrics"),
              ::testing::HasSubstr("sluice_backend_failures_total{reason=\"circuit_open\"} 2"));
}

// Opens a TCP connection to 127.0.0.1:port and sends `bytes`; returns the socket.
int SendRaw(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  return fd;
}

// Everything the server sends until it closes the connection (or 10 s pass).
std::string ReadUntilClosed(int fd) {
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// Verifies a client that stops mid-request cannot hold a connection: it is closed after the
// I/O timeout, and the server keeps answering others meanwhile.
TEST_F(HttpServerTest, StalledClientIsDisconnected) {
  HttpServerOptions options;
  options.io_timeout_seconds = 1;
  Serve(Load("domain: h\n"), options);
  int fd = SendRaw(http_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n");  // never ends
  EXPECT_EQ(HttpGet(http_->port(), "/healthz"), "OK\n\n200");
  const auto begin = std::chrono::steady_clock::now();
  ReadUntilClosed(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
}

// Verifies an oversized request head is refused, not buffered.
TEST_F(HttpServerTest, OversizedHeadersAreRefused) {
  HttpServerOptions options;
  options.max_header_bytes = 1024;
  Serve(Load("domain: h\n"), options);
  int fd = SendRaw(http_->port(), absl::StrCat("GET /healthz HTTP/1.1\r\nX-Big: ",
                                               std::string(4096, 'a'), "\r\n\r\n"));
  EXPECT_THAT(ReadUntilClosed(fd), ::testing::Not(::testing::HasSubstr("200 OK")));
}

// Verifies healthy_requires_config: unhealthy without a domain (or without any config).
TEST_F(HttpServerTest, HealthcheckRequiresADomainWhenAsked) {
  HttpServerOptions options;
  options.healthy_requires_config = true;
  Serve(std::make_shared<Config>(), options);
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "no domain loaded\n\n500");
  store_->Set(Load("domain: h\n"));
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "OK\n200");
  store_->Set(nullptr);
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "no domain loaded\n\n500");
  EXPECT_EQ(HttpGet(http_->port(), "/rlconfig"), "\n200");
}

// Verifies the debug address serves the same endpoints, /rlconfig among them.
TEST_F(HttpServerTest, DebugAddressServesTheSameEndpoints) {
  Serve(Load("domain: h\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
             "requests_per_unit: 1}\n"),
        {}, "127.0.0.1:0");
  ASSERT_NE(http_->debug_port(), 0);
  ASSERT_NE(http_->debug_port(), http_->port());
  EXPECT_THAT(HttpGet(http_->debug_port(), "/rlconfig"), ::testing::HasSubstr("h.k: "));
  EXPECT_THAT(HttpGet(http_->debug_port(), "/metrics"), ::testing::HasSubstr("sluice_config"));
}

// Verifies a bad debug address fails Start with a message naming it.
TEST_F(HttpServerTest, RejectsBadDebugAddress) {
  store_ = std::make_unique<ConfigStore>(Load("domain: h\n"));
  limiter_ =
      std::make_unique<RateLimiter>(*store_, backend_, clock_, metrics_, RateLimiterOptions());
  HttpServer http(*limiter_, *store_, backend_, metrics_);
  absl::Status status = http.Start("127.0.0.1:0", "nowhere");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("'nowhere'"));
}

}  // namespace
}  // namespace sluice
