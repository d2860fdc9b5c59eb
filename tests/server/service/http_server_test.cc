#include "server/service/http_server.h"

#include <arpa/inet.h>
#include <event2/util.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "tests/support/fake_clock.h"
#include "server/config/config_loader.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::HttpGet;
using testing::RunCommand;

// A backend that holds every decision until the test releases it: a /json request stays
// "being answered" meanwhile.
class HeldBackend : public Backend {
 public:
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> /*checks*/, const TraceParent& /*trace*/,
                EvaluateCallback done) override {
    std::lock_guard<std::mutex> lock(mu_);
    held_.push_back(std::move(done));
  }
  absl::string_view Name() const override { return "held"; }
  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }
  // Answers every held decision with `status` (the failure policy then allows).
  void Release(absl::Status status) {
    std::vector<EvaluateCallback> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
    }
    for (EvaluateCallback& done : held) {
      std::move(done)(status, {});
    }
  }

 private:
  std::mutex mu_;
  std::vector<EvaluateCallback> held_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void Serve(std::shared_ptr<const Config> config, HttpServerOptions options,
             const std::string& debug_address = "") {
    store_ = std::make_unique<ConfigStore>(std::move(config));
    limiter_ =
        std::make_unique<RateLimiter>(*store_, *serving_, clock_, metrics_, RateLimiterOptions());
    http_ = std::make_unique<HttpServer>(*limiter_, *store_, *serving_, metrics_, options);
    ASSERT_TRUE(http_->Start("127.0.0.1:0", debug_address).ok());
  }

  // Serves with a cap of two connections and a page of 10,000 rule series, fills the cap with
  // two clients that ask for /metrics and read nothing, and returns their sockets once both
  // answers are being written (their first bytes have arrived).
  void ServeTwoNonReadingScrapersAtTheCap(int* first, int* second);

  static std::shared_ptr<const Config> Load(const std::string& yaml) {
    auto config = LoadConfigText("h.yaml", yaml);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  FakeClock clock_{1700006400000000};
  MemoryBackend backend_{clock_};
  HeldBackend held_;
  Backend* serving_ = &backend_;  // the backend Serve uses
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

// Verifies a bad debug address fails Start with a message naming it and its flag.
TEST_F(HttpServerTest, RejectsBadDebugAddress) {
  store_ = std::make_unique<ConfigStore>(Load("domain: h\n"));
  limiter_ =
      std::make_unique<RateLimiter>(*store_, backend_, clock_, metrics_, RateLimiterOptions());
  HttpServer http(*limiter_, *store_, backend_, metrics_);
  absl::Status status = http.Start("127.0.0.1:0", "nowhere");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("--debug_address: 'nowhere'"));
}

// Verifies a debug address whose port is taken is reported as --debug_address's, not as the
// HTTP address's.
TEST_F(HttpServerTest, DebugAddressInUseNamesItsFlag) {
  Serve(Load("domain: h\n"), {});
  const std::string taken = absl::StrCat("127.0.0.1:", http_->port());
  HttpServer second(*limiter_, *store_, backend_, metrics_);
  absl::Status status = second.Start("127.0.0.1:0", taken);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("--debug_address=", taken, ": cannot listen: ")));
  status = second.Start(taken);
  EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("--http_address=", taken)));
}

// Verifies a debug address whose port is taken, when not required (envoyproxy/ratelimit's
// variables), lets Start go on: the HTTP address serves and debug_port() is 0.
TEST_F(HttpServerTest, DebugAddressNotRequiredIsSkippedWhenTaken) {
  Serve(Load("domain: h\n"), {});
  const std::string taken = absl::StrCat("127.0.0.1:", http_->port());
  HttpServer second(*limiter_, *store_, backend_, metrics_);
  ASSERT_TRUE(second.Start("127.0.0.1:0", taken, /*debug_required=*/false).ok());
  EXPECT_EQ(second.debug_port(), 0);
  EXPECT_EQ(HttpGet(second.port(), "/healthcheck"), "OK\n200");
}

// Verifies /healthcheck answers 500 while the backend has not answered at start
// (--wait_for_backend), 200 once it has, and that draining still wins.
TEST_F(HttpServerTest, HealthcheckIs500WhileWaitingForTheBackend) {
  Serve(Load("domain: h\n"), {});
  http_->SetWaitingForBackend(true);
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"),
            "waiting for the backend's first answer\n\n500");
  EXPECT_EQ(HttpGet(http_->port(), "/healthz"), "OK\n\n200");
  http_->SetWaitingForBackend(false);
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "OK\n200");
  http_->SetWaitingForBackend(true);
  http_->SetDraining();
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "draining\n\n500");
}

// Verifies GET / lists every endpoint as envoyproxy/ratelimit's debug port lists its own, one
// "path: help" line each, sorted, /rlconfig with upstream's text.
TEST_F(HttpServerTest, RootListsTheEndpoints) {
  Serve(Load("domain: h\n"), {});
  const std::string index = HttpGet(http_->port(), "/");
  EXPECT_THAT(index, ::testing::StartsWith("/: this list\n/config: "));
  EXPECT_THAT(index,
              HasSubstr("\n/rlconfig: print out the currently loaded configuration for "
                        "debugging\n"));
  std::vector<std::string> paths;
  for (absl::string_view line : absl::StrSplit(index, '\n')) {
    if (absl::StartsWith(line, "/")) {
      paths.emplace_back(line.substr(0, line.find(':')));
    }
  }
  EXPECT_THAT(paths, ::testing::ElementsAre("/", "/config", "/healthcheck", "/healthz", "/json",
                                            "/metrics", "/readyz", "/rlconfig", "/rlqs"));
  EXPECT_THAT(index, ::testing::EndsWith("\n200"));
}

// Opens a TCP connection to 127.0.0.1:port; returns the socket.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// One whole answer (head, and a body of its Content-Length) read from `fd`, within 10 s.
std::string ReadResponse(int fd) {
  std::string out;
  char c;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  size_t body = std::string::npos;
  while (absl::Now() < deadline && (body == std::string::npos || out.size() < body)) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 100) <= 0) {
      continue;
    }
    if (recv(fd, &c, 1, 0) != 1) {
      break;
    }
    out.push_back(c);
    if (body == std::string::npos && absl::EndsWith(out, "\r\n\r\n")) {
      size_t length = 0;
      const size_t at = out.find("Content-Length: ");
      if (at != std::string::npos) {
        length = std::stoul(out.substr(at + 16));
      }
      body = out.size() + length;
    }
  }
  return out;
}

// True if the server closes `fd` within `timeout` (what it sends meanwhile is read and
// dropped).
bool ClosedWithin(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  char buffer[4096];
  while (absl::Now() < deadline) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 50) > 0 && recv(fd, buffer, sizeof(buffer), 0) <= 0) {
      return true;
    }
  }
  return false;
}

// Sends `piece` every 200 ms, as a slow client does, until the server closes the connection;
// true if it did within `limit`.
bool TrickleUntilClosed(int fd, const std::string& piece, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (send(fd, piece.data(), piece.size(), MSG_NOSIGNAL) < 0 ||
        ClosedWithin(fd, absl::Milliseconds(200))) {
      return true;
    }
  }
  return false;
}

constexpr char kGetHealthz[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

// Verifies a request head that trickles in, one header line every 200 ms, is cut at the
// request timeout, although every line restarts the I/O timeout.
TEST_F(HttpServerTest, TricklingRequestHeadIsCutAtTheRequestTimeout) {
  HttpServerOptions options;
  options.request_timeout = absl::Seconds(1);
  options.io_timeout_seconds = 10;
  Serve(Load("domain: h\n"), options);
  int fd = SendRaw(http_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n");
  EXPECT_TRUE(TrickleUntilClosed(fd, "X-Slow: 1\r\n", absl::Seconds(8)));
  close(fd);
  EXPECT_THAT(HttpGet(http_->port(), "/metrics"),
              HasSubstr("sluice_http_connections_closed_total{reason=\"request_timeout\"} 1\n"));
}

// Verifies a request body that trickles in is cut at the request timeout too.
TEST_F(HttpServerTest, TricklingRequestBodyIsCutAtTheRequestTimeout) {
  HttpServerOptions options;
  options.request_timeout = absl::Seconds(1);
  Serve(Load("domain: h\n"), options);
  int fd = SendRaw(http_->port(),
                   "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{");
  EXPECT_TRUE(TrickleUntilClosed(fd, " ", absl::Seconds(8)));
  close(fd);
}

// Verifies an idle keep-alive connection is not cut at the request timeout (the I/O timeout
// governs it), and that the next request on it is timed from its first byte.
TEST_F(HttpServerTest, KeepAliveRequestIsTimedFromItsFirstByte) {
  HttpServerOptions options;
  options.request_timeout = absl::Seconds(1);
  options.io_timeout_seconds = 4;
  Serve(Load("domain: h\n"), options);
  int fd = SendRaw(http_->port(), kGetHealthz);
  EXPECT_THAT(ReadResponse(fd), HasSubstr("HTTP/1.1 200 OK"));
  absl::SleepFor(absl::Milliseconds(1500));  // idle past the request timeout, not the I/O one
  ASSERT_EQ(send(fd, kGetHealthz, strlen(kGetHealthz), MSG_NOSIGNAL),
            static_cast<ssize_t>(strlen(kGetHealthz)));
  EXPECT_THAT(ReadResponse(fd), HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_TRUE(TrickleUntilClosed(fd, "G", absl::Seconds(3)));
  close(fd);
}

// Verifies HEAD answers the headers of GET, Content-Length included, without a body, so the
// next answer on the connection is not corrupted.
TEST_F(HttpServerTest, HeadAnswersHeadersOnly) {
  Serve(Load("domain: h\n"), {});
  int fd = SendRaw(http_->port(), absl::StrCat("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                                               "GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                               "Connection: close\r\n\r\n"));
  const std::string out = ReadUntilClosed(fd);
  const std::vector<std::string> answers =
      absl::StrSplit(out, "HTTP/1.1 200 OK\r\n", absl::SkipEmpty());
  ASSERT_EQ(answers.size(), 2u) << out;
  EXPECT_THAT(answers[0], HasSubstr("Content-Length: 3\r\n"));
  EXPECT_TRUE(absl::EndsWith(answers[0], "\r\n\r\n")) << out;  // no body
  EXPECT_TRUE(absl::EndsWith(answers[1], "\r\n\r\nOK\n")) << out;
}

// `curl -X method` of http://127.0.0.1:port/path: the answer's head, body and status code.
std::string Request(int port, const std::string& method, const std::string& path) {
  return RunCommand(absl::StrCat("curl -s -D - -o - -w '%{http_code}' -X ", method,
                                 " http://127.0.0.1:", port, path))
      .second;
}

// Verifies a method a known path does not take is 405 with Allow naming what it takes, and an
// unknown path stays 404 whatever the method.
TEST_F(HttpServerTest, OtherMethodsAre405WithAllow) {
  Serve(Load("domain: h\n"), {});
  const std::string post_healthz = Request(http_->port(), "POST", "/healthz");
  EXPECT_THAT(post_healthz, HasSubstr("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(post_healthz, HasSubstr("Allow: GET, HEAD\r\n"));
  EXPECT_THAT(post_healthz, HasSubstr("POST is not allowed on /healthz; use GET, HEAD\n"));
  for (const char* path : {"/healthcheck", "/readyz", "/config", "/rlconfig", "/metrics"}) {
    EXPECT_THAT(Request(http_->port(), "PUT", path), HasSubstr("Allow: GET, HEAD\r\n")) << path;
  }
  const std::string get_json = Request(http_->port(), "GET", "/json");
  EXPECT_THAT(get_json, HasSubstr("Allow: POST\r\n"));
  EXPECT_TRUE(absl::EndsWith(get_json, "405")) << get_json;
  EXPECT_TRUE(absl::EndsWith(Request(http_->port(), "DELETE", "/nowhere"), "404"));
}

// Verifies that with no config loaded /json answers 503 as gRPC answers UNAVAILABLE, and
// /readyz is 503 saying why.
TEST_F(HttpServerTest, NoConfigIsServiceUnavailable) {
  Serve(nullptr, {});
  const std::string json = RunCommand(absl::StrCat(
      "curl -s -D - -o - -w '%{http_code}' -X POST http://127.0.0.1:", http_->port(),
      "/json --data '{\"domain\":\"h\",\"descriptors\":[{\"entries\":[{\"key\":\"k\","
      "\"value\":\"v\"}]}]}'")).second;
  EXPECT_THAT(json, HasSubstr("HTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_THAT(json, HasSubstr("UNAVAILABLE: no rate limit configuration loaded yet\n503"));
  EXPECT_EQ(HttpGet(http_->port(), "/readyz"),
            "no config loaded: every call fails UNAVAILABLE until a valid one is loaded\n\n503");
  store_->Set(Load("domain: h\n"));
  EXPECT_EQ(HttpGet(http_->port(), "/readyz"), "OK\n\n200");
}

// Verifies /config is rendered once per config and follows a swap.
TEST_F(HttpServerTest, ConfigPageIsRenderedOncePerConfig) {
  const std::string rule = "    rate_limit: {unit: second, requests_per_unit: 1}\n";
  Serve(Load("domain: h\ndescriptors:\n  - key: a\n" + rule), {});
  EXPECT_THAT(HttpGet(http_->port(), "/config"), HasSubstr("h.a: "));
  EXPECT_THAT(HttpGet(http_->port(), "/rlconfig"), HasSubstr("h.a: "));
  EXPECT_EQ(http_->config_renders(), 1);
  store_->Set(Load("domain: h\ndescriptors:\n  - key: b\n" + rule));
  const std::string swapped = HttpGet(http_->port(), "/config");
  EXPECT_THAT(swapped, HasSubstr("h.b: "));
  EXPECT_THAT(swapped, ::testing::Not(HasSubstr("h.a: ")));
  EXPECT_EQ(http_->config_renders(), 2);
}

// Verifies a /config page over its cap is cut at a line boundary, its last line saying so.
TEST_F(HttpServerTest, ConfigPageIsCutAtItsCap) {
  HttpServerOptions options;
  options.config_dump_max_bytes = 300;
  std::string yaml = "domain: h\ndescriptors:\n";
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&yaml, "  - key: k", i,
                    "\n    rate_limit: {unit: second, requests_per_unit: 1}\n");
  }
  Serve(Load(yaml), options);
  const std::string page = HttpGet(http_->port(), "/config");
  std::vector<std::string> lines = absl::StrSplit(page, '\n');
  ASSERT_GE(lines.size(), 4u) << page;
  EXPECT_EQ(lines.back(), "200");
  const std::string& last = lines[lines.size() - 3];  // before the empty line and the code
  EXPECT_TRUE(absl::StartsWith(last, "... truncated: ")) << page;
  EXPECT_THAT(last, HasSubstr("raise --config_dump_max_bytes"));
  EXPECT_LE(page.find("... truncated"), 300u);
  for (size_t i = 0; i + 3 < lines.size(); ++i) {
    EXPECT_THAT(lines[i], HasSubstr("(h.yaml:")) << "cut mid-line: " << lines[i];
  }
}

// Verifies the connection cap: a newcomer at the cap closes the connection that has waited
// longest for its request, and the others keep serving.
TEST_F(HttpServerTest, ConnectionCapClosesTheLongestWaiting) {
  HttpServerOptions options;
  options.max_connections = 3;
  Serve(Load("domain: h\n"), options);
  int idle[3];
  for (int& fd : idle) {
    fd = SendRaw(http_->port(), kGetHealthz);
    ASSERT_THAT(ReadResponse(fd), HasSubstr("HTTP/1.1 200 OK"));  // now idle, keep-alive
  }
  EXPECT_EQ(HttpGet(http_->port(), "/healthz"), "OK\n\n200");
  EXPECT_TRUE(ClosedWithin(idle[0], absl::Seconds(5)));
  for (int fd : {idle[1], idle[2]}) {
    ASSERT_EQ(send(fd, kGetHealthz, strlen(kGetHealthz), MSG_NOSIGNAL),
              static_cast<ssize_t>(strlen(kGetHealthz)));
    EXPECT_THAT(ReadResponse(fd), HasSubstr("HTTP/1.1 200 OK"));
  }
  for (int fd : idle) {
    close(fd);
  }
}

// Verifies that at the cap with every connection being answered the newcomer gets a 503 naming
// the flag, and accepting resumes once a connection can make room.
TEST_F(HttpServerTest, ConnectionCapRefusesWhenEveryConnectionIsBusy) {
  HttpServerOptions options;
  options.max_connections = 1;
  serving_ = &held_;
  Serve(Load("domain: h\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
             "requests_per_unit: 1}\n"),
        options);
  const std::string body =
      R"({"domain":"h","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})";
  int busy = SendRaw(http_->port(), absl::StrCat("POST /json HTTP/1.1\r\nHost: x\r\n"
                                                 "Content-Length: ",
                                                 body.size(), "\r\n\r\n", body));
  for (int i = 0; i < 500 && held_.held() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(held_.held(), 1u);
  const std::string refused = ReadUntilClosed(Connect(http_->port()));
  EXPECT_THAT(refused, HasSubstr("HTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_THAT(refused, HasSubstr("too many HTTP connections (--http_max_connections=1)"));
  held_.Release(absl::UnavailableError("released"));
  EXPECT_THAT(ReadResponse(busy), HasSubstr("HTTP/1.1 200 OK"));
  // The answered connection is idle now, so a newcomer is accepted and makes room.
  EXPECT_EQ(HttpGet(http_->port(), "/healthz"), "OK\n\n200");
  EXPECT_TRUE(ClosedWithin(busy, absl::Seconds(5)));
  close(busy);
  const std::string metrics = HttpGet(http_->port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("sluice_http_connections_closed_total{reason=\"refused\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("sluice_http_connections_max 1\n"));
}

// Fills the metrics with `series` per-rule series of long keys: a page of many megabytes, more
// than loopback's socket buffers hold, so a client that does not read stalls its answer.
void FillRuleSeries(Metrics& metrics, int series) {
  for (int i = 0; i < series; ++i) {
    metrics.CountRule(absl::StrCat("h.user_", i, "_", std::string(300, 'v')), RuleHits{.total = 1});
  }
}

constexpr char kGetMetrics[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

void HttpServerTest::ServeTwoNonReadingScrapersAtTheCap(int* first, int* second) {
  HttpServerOptions options;
  options.max_connections = 2;
  FillRuleSeries(metrics_, 10000);
  Serve(Load("domain: h\n"), options);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  *first = SendRaw(http_->port(), kGetMetrics);
  *second = SendRaw(http_->port(), kGetMetrics);
  for (int fd : {*first, *second}) {
    pollfd ready{fd, POLLIN, 0};
    ASSERT_EQ(poll(&ready, 1, 10000), 1);
  }
}

// Verifies scrapes share one page: scrapes within the page's max age are served the page
// rendered first, the connection metrics still current.
TEST_F(HttpServerTest, MetricsPageIsRenderedOncePerMaxAge) {
  HttpServerOptions options;
  options.metrics_max_age = absl::Hours(1);
  Serve(Load("domain: h\n"), options);
  const std::string first = HttpGet(http_->port(), "/metrics");
  EXPECT_THAT(first, HasSubstr("sluice_http_connections 1\n"));
  const int idle = SendRaw(http_->port(), kGetHealthz);
  ASSERT_THAT(ReadResponse(idle), HasSubstr("HTTP/1.1 200 OK"));
  const std::string second = HttpGet(http_->port(), "/metrics");
  EXPECT_EQ(http_->metrics_renders(), 1);
  EXPECT_THAT(second, HasSubstr("sluice_http_connections 2\n"));
  close(idle);
}

// Verifies a client that asks for /metrics and never reads is cut off at the answer timeout,
// and counted, while health checks are answered meanwhile.
TEST_F(HttpServerTest, ScraperThatDoesNotReadIsCutAtTheAnswerTimeout) {
  HttpServerOptions options;
  options.answer_timeout = absl::Milliseconds(500);
  FillRuleSeries(metrics_, 10000);
  Serve(Load("domain: h\n"), options);
  std::vector<int> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(SendRaw(http_->port(), kGetMetrics));
  }
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "OK\n200");
  // Not a byte read until the timeout is well past (reading would let the answers finish).
  absl::SleepFor(absl::Seconds(2));
  for (int fd : stalled) {
    // What the kernel buffered is read, then the close.
    EXPECT_TRUE(ClosedWithin(fd, absl::Seconds(10)));
    close(fd);
  }
  EXPECT_THAT(HttpGet(http_->port(), "/metrics"),
              HasSubstr("sluice_http_connections_closed_total{reason=\"answer_timeout\"} 4\n"));
}

// Verifies that at the cap, with every connection writing an answer nobody reads, a newcomer
// is served once the oldest has stalled for a moment: it is closed to make room, not the
// newcomer refused.
TEST_F(HttpServerTest, ConnectionCapEvictsAStalledReader) {
  int first = -1;
  int second = -1;
  ServeTwoNonReadingScrapersAtTheCap(&first, &second);
  if (HasFatalFailure()) return;
  // Both writing, then stalled past the grace of a second.
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "OK\n200");
  // The one that started writing first was closed (which one that is depends on the order the
  // loop handed them their page): reading the other lets its answer finish, not close.
  EXPECT_TRUE(ClosedWithin(first, absl::Seconds(3)) || ClosedWithin(second, absl::Seconds(3)));
  EXPECT_THAT(HttpGet(http_->port(), "/metrics"),
              HasSubstr("sluice_http_connections_closed_total{reason=\"evicted\"} 1\n"));
  close(first);
  close(second);
}

// Verifies that a newcomer at the cap, while every connection writes an answer nobody reads but
// none has stalled for long, is served, not refused: it waits, one over the cap, for the oldest
// to be closed.
TEST_F(HttpServerTest, ConnectionCapKeepsANewcomerUntilAReaderStalls) {
  int first = -1;
  int second = -1;
  ServeTwoNonReadingScrapersAtTheCap(&first, &second);
  if (HasFatalFailure()) return;
  // Both writing, neither for long.
  EXPECT_EQ(HttpGet(http_->port(), "/healthcheck"), "OK\n200");
  EXPECT_THAT(HttpGet(http_->port(), "/metrics"),
              HasSubstr("sluice_http_connections_closed_total{reason=\"refused\"} 0\n"));
  close(first);
  close(second);
}

// Lowers this process's descriptor limit and takes every descriptor left, until destroyed.
class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, 1024);
    setrlimit(RLIMIT_NOFILE, &lowered);
    for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) {
      taken_.push_back(fd);
    }
  }
  ~DescriptorsExhausted() {
    for (int fd : taken_) {
      close(fd);
    }
    setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  rlimit saved_{};
  std::vector<int> taken_;
};

// Verifies that when accept fails at the descriptor limit the server pauses accepting with
// back-off instead of retrying in a loop, logs it once, and accepts again once descriptors
// are free.
TEST_F(HttpServerTest, AcceptBacksOffAtTheDescriptorLimit) {
  Serve(Load("domain: h\n"), {});
  int client = socket(AF_INET, SOCK_STREAM, 0);  // before the table is full
  ::testing::internal::CaptureStderr();
  {
    DescriptorsExhausted exhausted;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(http_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    // Long enough for a retry loop to fail thousands of times; back-off fails a handful.
    absl::SleepFor(absl::Milliseconds(700));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(send(client, kGetHealthz, strlen(kGetHealthz), MSG_NOSIGNAL),
            static_cast<ssize_t>(strlen(kGetHealthz)));
  EXPECT_THAT(ReadResponse(client), HasSubstr("HTTP/1.1 200 OK"));
  close(client);
  const std::string metrics = HttpGet(http_->port(), "/metrics");
  const std::string name = "\nsluice_http_accept_errors_total ";
  const size_t at = metrics.find(name);
  ASSERT_NE(at, std::string::npos) << metrics;
  const int errors = std::stoi(metrics.substr(at + name.size()));
  EXPECT_GE(errors, 1);
  EXPECT_LE(errors, 10);
  std::vector<std::string> lines = absl::StrSplit(log, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), 1u) << log;
  EXPECT_THAT(log, HasSubstr("HTTP: accept failed: Too many open files"));
}

// Verifies libevent's own warnings go through the log at most once per interval, instead of a
// line each to stderr.
TEST_F(HttpServerTest, LibeventWarningsAreRateLimited) {
  Serve(Load("domain: h\n"), {});  // routes libevent's log
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 50; ++i) {
    evutil_make_socket_nonblocking(-1);  // libevent warns "fcntl(-1, F_GETFL)"
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  std::vector<std::string> lines = absl::StrSplit(log, '\n', absl::SkipEmpty());
  EXPECT_LE(lines.size(), 1u) << log;
  if (!lines.empty()) {
    EXPECT_THAT(lines[0], HasSubstr("libevent: fcntl(-1, F_GETFL)"));
  }
}

// ---- The admin API.

// `curl -X POST` of `body` to http://127.0.0.1:port/path with `headers` (-H each): the answer's
// head, body and status code.
std::string Post(int port, const std::string& path, const std::string& body,
                 const std::vector<std::string>& headers = {}) {
  std::string command = absl::StrCat("curl -s -D - -o - -w '%{http_code}' -X POST http://127.0.0.1:",
                                     port, path, " --data '", body, "'");
  for (const std::string& header : headers) {
    absl::StrAppend(&command, " -H '", header, "'");
  }
  return RunCommand(command).second;
}

constexpr char kAdminBody[] =
    R"({"domain":"h","descriptors":[{"entries":[{"key":"a","value":"x"}]}]})";

class HttpAdminTest : public HttpServerTest {
 protected:
  void ServeAdmin(const std::string& token) {
    store_ = std::make_unique<ConfigStore>(Load(kRules));
    admin_ = std::make_unique<AdminService>(*store_, backend_, nullptr, AdminServiceOptions{});
    HttpServerOptions options;
    options.admin = admin_.get();
    options.admin_token = token;
    limiter_ =
        std::make_unique<RateLimiter>(*store_, *serving_, clock_, metrics_, RateLimiterOptions());
    http_ = std::make_unique<HttpServer>(*limiter_, *store_, *serving_, metrics_, options);
    ASSERT_TRUE(http_->Start("127.0.0.1:0").ok());
  }

  static constexpr char kRules[] =
      "domain: h\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n";
  std::unique_ptr<AdminService> admin_;
};

// Verifies that with the admin API off /admin/* answers 404 naming --admin_api, whatever the
// method, and the index does not list it.
TEST_F(HttpServerTest, AdminApiOffIs404NamingTheFlag) {
  Serve(Load("domain: h\n"), {});
  for (const char* path : {"/admin/inspect", "/admin/reset"}) {
    const std::string answer = Post(http_->port(), path, kAdminBody);
    EXPECT_THAT(answer, HasSubstr("HTTP/1.1 404 Not Found\r\n"));
    EXPECT_THAT(answer, HasSubstr("--admin_api"));
    EXPECT_THAT(Request(http_->port(), "GET", path), HasSubstr("--admin_api"));
  }
  EXPECT_THAT(HttpGet(http_->port(), "/"), ::testing::Not(HasSubstr("/admin")));
}

// Verifies that with a token a call without it, or with another, is 401 and changes nothing,
// and one with it is answered.
TEST_F(HttpAdminTest, TokenIsRequired) {
  ServeAdmin("s3cret");
  const std::string missing = Post(http_->port(), "/admin/reset", kAdminBody);
  EXPECT_THAT(missing, HasSubstr("HTTP/1.1 401 Unauthorized\r\n"));
  EXPECT_THAT(missing, HasSubstr("WWW-Authenticate: Bearer"));
  const std::string wrong = Post(http_->port(), "/admin/reset", kAdminBody,
                                 {"Authorization: Bearer nope"});
  EXPECT_THAT(wrong, HasSubstr("HTTP/1.1 401 Unauthorized\r\n"));
  EXPECT_THAT(wrong, HasSubstr("wrong token"));
  const std::string right = Post(http_->port(), "/admin/inspect", kAdminBody,
                                 {"Authorization: Bearer s3cret"});
  EXPECT_THAT(right, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(right, HasSubstr("\"storage_key\":\"{h|a=x}fw:60\""));
}

// Verifies inspect and reset answer JSON: the state a decision left, then its reset (the key
// deleted), then the state gone; and the index lists both endpoints.
TEST_F(HttpAdminTest, InspectAndResetAnswerJson) {
  ServeAdmin("");
  const std::string json = Post(http_->port(), "/json", kAdminBody);
  EXPECT_TRUE(absl::EndsWith(json, "200")) << json;
  const std::string before = Post(http_->port(), "/admin/inspect", kAdminBody);
  EXPECT_THAT(before, HasSubstr("Content-Type: application/json"));
  EXPECT_THAT(before, HasSubstr("\"count\":1"));
  const std::string reset = Post(http_->port(), "/admin/reset", kAdminBody);
  EXPECT_THAT(reset, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(reset, HasSubstr("\"deleted\":[\"{h|a=x}fw:60\"]"));
  EXPECT_THAT(reset, HasSubstr("\"result\":\"ok\""));
  const std::string after = Post(http_->port(), "/admin/inspect", kAdminBody);
  EXPECT_THAT(after, HasSubstr("\"exists\":false"));
  const std::string index = HttpGet(http_->port(), "/");
  EXPECT_THAT(index, HasSubstr("/admin/inspect: "));
  EXPECT_THAT(index, HasSubstr("/admin/reset: "));
}

// Verifies a bad body is 400 as /json answers it: the JSON check's fault, protobuf's field, or
// the request's own field; and GET is 405 naming POST.
TEST_F(HttpAdminTest, BadBodyIs400NamingTheField) {
  ServeAdmin("");
  const std::string duplicate =
      Post(http_->port(), "/admin/inspect", R"({"domain":"h","domain":"i"})");
  EXPECT_THAT(duplicate, HasSubstr("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(duplicate, HasSubstr("invalid RateLimitRequest JSON: duplicate key \"domain\""));
  const std::string unknown = Post(http_->port(), "/admin/reset", R"({"domian":"h"})");
  EXPECT_THAT(unknown, HasSubstr("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(unknown, HasSubstr("domian"));
  const std::string empty_key = Post(http_->port(), "/admin/reset",
                                     R"({"domain":"h","descriptors":[{"entries":[{"key":""}]}]})");
  EXPECT_THAT(empty_key, HasSubstr("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(empty_key, HasSubstr("descriptors[0].entries[0].key"));
  const std::string get = Request(http_->port(), "GET", "/admin/inspect");
  EXPECT_THAT(get, HasSubstr("Allow: POST\r\n"));
}

}  // namespace
}  // namespace sluice
