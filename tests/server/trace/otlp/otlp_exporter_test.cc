// Tests of both OTLP exporters (otlp_grpc_exporter.h, otlp_http_exporter.h) against the fake
// collector, of their endpoint parsing (otlp_endpoint.h), and of what the HTTP exporter's libcurl
// does for it: answers however framed, redirects not followed, TLS against a small HTTPS server
// made here, and proxies from the environment, through a small proxy made here.
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/trace/otlp/batch_span_processor.h"
#include "server/trace/otlp/otlp_endpoint.h"
#include "server/trace/otlp/otlp_grpc_exporter.h"
#include "server/trace/otlp/otlp_http_exporter.h"
#include "tests/support/certificates.h"
#include "tests/support/fake_otlp_collector.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using testing::FakeOtlpCollector;
using ::testing::HasSubstr;
using ::testing::Not;
using Mode = FakeOtlpCollector::Mode;
using Protocol = FakeOtlpCollector::Protocol;

constexpr absl::Duration kWait = absl::Seconds(10);

OtlpExporterOptions Options(const std::string& endpoint) {
  OtlpExporterOptions options;
  options.endpoint = endpoint;
  options.headers = {{"X-Tenant", "blue"}, {"authorization", "Bearer t0ken"}};
  options.timeout = absl::Seconds(5);
  options.resource.service_name = "ratelimit";
  options.resource.service_instance_id = "pod-1";
  return options;
}

// `n` spans named span0, span1, ... (span names are views of lasting storage: these are kept
// for the whole program).
std::vector<SpanData> Spans(int n) {
  static std::mutex mu;
  static std::deque<std::string>* names = new std::deque<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  std::vector<SpanData> spans(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    spans[static_cast<size_t>(i)].trace_id[15] = 1;
    spans[static_cast<size_t>(i)].span_id[7] = static_cast<uint8_t>(i + 1);
    spans[static_cast<size_t>(i)].name = names->emplace_back(absl::StrCat("span", i));
  }
  return spans;
}

std::unique_ptr<SpanExporter> Make(Protocol protocol, OtlpExporterOptions options) {
  if (protocol == Protocol::kGrpc) {
    auto made = OtlpGrpcExporter::Create(std::move(options));
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *std::move(made) : nullptr;
  }
  auto made = OtlpHttpExporter::Create(std::move(options));
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

std::string Header(const FakeOtlpCollector::Export& received, const std::string& name) {
  auto found = received.headers.find(name);
  return found == received.headers.end() ? "<none>" : found->second;
}

class OtlpExporterTest : public ::testing::TestWithParam<Protocol> {
 protected:
  void SetUp() override {
    auto started = FakeOtlpCollector::Start();
    ASSERT_TRUE(started.ok()) << started.status();
    collector_ = *std::move(started);
  }

  std::string Endpoint() const {
    return GetParam() == Protocol::kGrpc ? collector_->grpc_endpoint()
                                         : collector_->http_endpoint();
  }

  std::unique_ptr<FakeOtlpCollector> collector_;
};

INSTANTIATE_TEST_SUITE_P(Protocols, OtlpExporterTest,
                         ::testing::Values(Protocol::kGrpc, Protocol::kHttp),
                         [](const ::testing::TestParamInfo<Protocol>& info) {
                           return info.param == Protocol::kGrpc ? "Grpc" : "Http";
                         });

// Verifies that the spans arrive, with the resource, by the protocol chosen, and that the
// configured headers come with them (names lower-cased).
TEST_P(OtlpExporterTest, DeliversSpansWithHeaders) {
  std::unique_ptr<SpanExporter> exporter = Make(GetParam(), Options(Endpoint()));
  ASSERT_NE(exporter, nullptr);
  ASSERT_TRUE(exporter->Export(Spans(3)).ok());
  ASSERT_TRUE(collector_->WaitForSpans(3, kWait));
  const auto spans = collector_->Spans();
  EXPECT_EQ(spans[2].span.name(), "span2");
  EXPECT_EQ(spans[0].protocol, GetParam());
  EXPECT_EQ(spans[0].scope.name(), "sluice");
  EXPECT_EQ(spans[0].resource.attributes(0).key(), "service.name");
  EXPECT_EQ(spans[0].resource.attributes(0).value().string_value(), "ratelimit");
  const auto exports = collector_->Exports();
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(Header(exports[0], "x-tenant"), "blue");
  EXPECT_EQ(Header(exports[0], "authorization"), "Bearer t0ken");
  if (GetParam() == Protocol::kHttp) {
    EXPECT_EQ(Header(exports[0], "content-type"), "application/x-protobuf");
    EXPECT_EQ(Header(exports[0], "host"), absl::StrCat("127.0.0.1:", collector_->http_port()));
  }
  EXPECT_THAT(exporter->Describe(), HasSubstr(absl::StrCat(
                                        "127.0.0.1:", GetParam() == Protocol::kGrpc
                                                          ? collector_->grpc_port()
                                                          : collector_->http_port())));
}

// Verifies that a failing collector gives kUnavailable at once, naming what it answered.
TEST_P(OtlpExporterTest, FailingCollectorGivesUnavailableQuickly) {
  collector_->SetMode(Mode::kFail);
  std::unique_ptr<SpanExporter> exporter = Make(GetParam(), Options(Endpoint()));
  ASSERT_NE(exporter, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = exporter->Export(Spans(2));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam() == Protocol::kHttp
                                              ? "HTTP/1.1 503 Service Unavailable"
                                              : "fake collector: failing"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("2 spans"));
  EXPECT_EQ(collector_->exports(), 1);
  EXPECT_TRUE(collector_->Spans().empty());
}

// Verifies that a collector that does not answer gives kDeadlineExceeded after about the
// timeout, and that the exporter works again once the collector does.
TEST_P(OtlpExporterTest, StalledCollectorGivesDeadlineExceeded) {
  collector_->SetMode(Mode::kStall);
  OtlpExporterOptions options = Options(Endpoint());
  options.timeout = absl::Milliseconds(300);
  std::unique_ptr<SpanExporter> exporter = Make(GetParam(), options);
  ASSERT_NE(exporter, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = exporter->Export(Spans(1));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(3));

  collector_->SetMode(Mode::kOk);
  EXPECT_TRUE(exporter->Export(Spans(1)).ok());
}

// Verifies that a collector nobody listens for gives kUnavailable.
TEST_P(OtlpExporterTest, UnreachableCollectorGivesUnavailable) {
  const int port = testing::FreePort();
  std::unique_ptr<SpanExporter> exporter =
      Make(GetParam(), Options(GetParam() == Protocol::kGrpc
                                   ? absl::StrCat("http://127.0.0.1:", port)
                                   : absl::StrCat("http://127.0.0.1:", port, "/v1/traces")));
  ASSERT_NE(exporter, nullptr);
  const absl::Status status = exporter->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

// Verifies that spans given to the batch processor reach the collector on their own.
TEST_P(OtlpExporterTest, BatchProcessorDeliversThroughTheExporter) {
  BatchSpanProcessor processor(Make(GetParam(), Options(Endpoint())),
                               {.export_interval = absl::Milliseconds(20)});
  for (SpanData& span : Spans(5)) {
    processor.Submit(std::move(span));
  }
  ASSERT_TRUE(collector_->WaitForSpans(5, kWait));
  processor.Shutdown(kWait);
  EXPECT_EQ(processor.spans_exported(), 5u);
}

// Verifies that a partial success rejecting spans is an error naming the count and the
// collector's message.
TEST(OtlpGrpcExporterTest, PartialSuccessIsAnError) {
  auto collector = FakeOtlpCollector::Start();
  ASSERT_TRUE(collector.ok()) << collector.status();
  (*collector)->SetPartialSuccess(2, "span names too long");
  std::unique_ptr<SpanExporter> exporter =
      Make(Protocol::kGrpc, Options((*collector)->grpc_endpoint()));
  ASSERT_NE(exporter, nullptr);
  const absl::Status status = exporter->Export(Spans(3));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("rejected 2: span names too long"));
}

// Verifies that one HTTP connection carries successive exports, and that when the collector
// closes it a new one is made without failing the export.
TEST(OtlpHttpExporterTest, KeepsOneConnectionAndReconnects) {
  auto collector = FakeOtlpCollector::Start();
  ASSERT_TRUE(collector.ok()) << collector.status();
  auto exporter = OtlpHttpExporter::Create(Options((*collector)->http_endpoint()));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*exporter)->Export(Spans(1)).ok());
  }
  EXPECT_EQ((*collector)->http_connections(), 1);
  EXPECT_EQ((*exporter)->connections_made(), 1);

  (*collector)->CloseHttpConnections();
  const absl::Status status = (*exporter)->Export(Spans(1));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ((*exporter)->connections_made(), 2);
  EXPECT_TRUE((*collector)->WaitForSpans(4, kWait));
}

// Verifies the HTTP request's own headers: the exporter's User-Agent, a configured header with an
// empty value sent as one, and no "Expect: 100-continue" even for a batch of a megabyte or more
// (libcurl's own would hold it back for a round trip).
TEST(OtlpHttpExporterTest, SendsHeadersAsGivenAndNoExpect) {
  auto collector = FakeOtlpCollector::Start();
  ASSERT_TRUE(collector.ok()) << collector.status();
  OtlpExporterOptions options = Options((*collector)->http_endpoint());
  options.headers.emplace_back("X-Empty", "");
  auto exporter = OtlpHttpExporter::Create(options);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  std::vector<SpanData> spans = Spans(2);
  const std::string long_value(200, 'v');
  for (SpanData& span : spans) {
    for (int i = 0; i < 32; ++i) {
      span.Add("sluice.test", absl::string_view(long_value));
    }
  }
  std::vector<SpanData> batch;
  for (int i = 0; i < 150; ++i) {
    batch.insert(batch.end(), spans.begin(), spans.end());
  }
  const absl::Status status = (*exporter)->Export(batch);
  EXPECT_TRUE(status.ok()) << status;
  const auto exports = (*collector)->Exports();
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_GE(exports[0].request.ByteSizeLong(), 1u << 20);
  EXPECT_EQ(Header(exports[0], "user-agent"), "sluice-otlp");
  EXPECT_EQ(Header(exports[0], "x-empty"), "");
  EXPECT_EQ(Header(exports[0], "expect"), "<none>");
}

// Verifies that options that cannot work are refused when the exporter is made, by name.
TEST(OtlpExporterOptionsTest, CreateRefusesBadOptions) {
  struct Case {
    std::string endpoint;
    std::vector<std::pair<std::string, std::string>> headers;
    absl::Duration timeout;
    std::string ca_file;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"ftp://collector:4318", {}, absl::Seconds(1), "", "https://"},
      {"http://collector:4318", {{"bad header", "x"}}, absl::Seconds(1), "", "bad header"},
      {"http://collector:4318", {{"x-key", "a\r\nInjected: 1"}}, absl::Seconds(1), "",
       "printable ASCII"},
      {"http://collector:4318", {{"Content-Type", "text/plain"}}, absl::Seconds(1), "",
       "set by the exporter"},
      {"http://collector:4318", {}, absl::ZeroDuration(), "", "timeout must be positive"},
      {"https://collector:4318", {}, absl::Seconds(1), "/nonexistent/ca.pem",
       "/nonexistent/ca.pem"},
  };
  for (const Case& c : cases) {
    for (Protocol protocol : {Protocol::kGrpc, Protocol::kHttp}) {
      OtlpExporterOptions options;
      options.endpoint = c.endpoint;
      options.headers = c.headers;
      options.timeout = c.timeout;
      options.ca_file = c.ca_file;
      const absl::Status status =
          protocol == Protocol::kGrpc ? OtlpGrpcExporter::Create(options).status()
                                      : OtlpHttpExporter::Create(options).status();
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
          << c.endpoint << " " << static_cast<int>(protocol) << ": " << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr(c.expected)) << c.endpoint;
    }
  }
}

// Verifies URL parsing: schemes, default ports and path, IPv6 literals, queries, and what is
// refused.
TEST(OtlpEndpointTest, ParsesOtlpUrls) {
  struct Case {
    std::string url;
    bool ok = false;
    bool tls = false;
    std::string host = "";
    int port = 0;
    std::string path = "";
    std::string written = "";
  };
  const std::vector<Case> cases = {
      {"http://collector:4318/v1/traces", true, false, "collector", 4318, "/v1/traces",
       "http://collector:4318/v1/traces"},
      {"http://collector:4318", true, false, "collector", 4318, "/v1/traces",
       "http://collector:4318/v1/traces"},
      {"https://otel.example.com", true, true, "otel.example.com", 443, "/v1/traces",
       "https://otel.example.com/v1/traces"},
      {"http://collector", true, false, "collector", 80, "/v1/traces",
       "http://collector/v1/traces"},
      {"http://collector:80/", true, false, "collector", 80, "/", "http://collector:80/"},
      {"https://collector:443/otlp/v1/traces?tenant=a", true, true, "collector", 443,
       "/otlp/v1/traces?tenant=a", "https://collector:443/otlp/v1/traces?tenant=a"},
      {"http://collector:4318?x=1", true, false, "collector", 4318, "/?x=1",
       "http://collector:4318/?x=1"},
      {"http://[::1]:4318/v1/traces", true, false, "[::1]", 4318, "/v1/traces",
       "http://[::1]:4318/v1/traces"},
      {"https://[fd00::2]", true, true, "[fd00::2]", 443, "/v1/traces",
       "https://[fd00::2]/v1/traces"},
      {"http://10.0.0.7:4318/v1/traces", true, false, "10.0.0.7", 4318, "/v1/traces",
       "http://10.0.0.7:4318/v1/traces"},
      // An empty port is the scheme's (RFC 3986, 3.2.3), as libcurl reads it.
      {"http://collector:/v1/traces", true, false, "collector", 80, "/v1/traces",
       "http://collector/v1/traces"},
      {"collector:4318", false},
      {"grpc://collector:4317", false},
      {"ftp://collector:21/v1/traces", false},
      {"http://", false},
      {"http://:4318/v1/traces", false},
      {"http://collector:0", false},
      {"http://collector:65536", false},
      {"http://collector:43a8", false},
      {"http://collector:+80", false},
      {"http://user:pw@collector:4318", false},
      {"http://collector:4318/v1/traces#top", false},
      {"http://[::1/v1/traces", false},
      {"http://[collector]:4318", false},
      {"http://[::1]4318", false},
      {"http://coll ector:4318", false},
      {"http://collector:4318/v1/tra ces", false},
  };
  for (const Case& c : cases) {
    absl::StatusOr<OtlpEndpoint> endpoint = ParseOtlpEndpoint(c.url, "/v1/traces");
    ASSERT_EQ(endpoint.ok(), c.ok) << c.url << ": " << endpoint.status();
    if (!c.ok) {
      EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument) << c.url;
      EXPECT_THAT(std::string(endpoint.status().message()), HasSubstr(c.url));
      continue;
    }
    EXPECT_EQ(endpoint->tls, c.tls) << c.url;
    EXPECT_EQ(endpoint->host, c.host) << c.url;
    EXPECT_EQ(endpoint->port, c.port) << c.url;
    EXPECT_EQ(endpoint->path, c.path) << c.url;
    EXPECT_EQ(endpoint->url, c.written) << c.url;
    EXPECT_EQ(endpoint->Authority(), absl::StrCat(c.host, ":", c.port)) << c.url;
  }
}

// Verifies the OTLP/gRPC endpoint forms and which of them mean TLS.
TEST(OtlpGrpcEndpointTest, ParsesEndpointForms) {
  struct Case {
    std::string endpoint;
    bool insecure = false;
    bool ok = false;
    std::string authority = "";
    bool tls = false;
  };
  const std::vector<Case> cases = {
      {"http://collector:4317", false, true, "collector:4317", false},
      {"https://collector:4317", true, true, "collector:4317", true},
      {"http://collector:4317/", false, true, "collector:4317", false},
      {"collector:4317", false, true, "collector:4317", true},
      {"collector:4317", true, true, "collector:4317", false},
      {"[::1]:4317", true, true, "[::1]:4317", false},
      {"https://otel.example.com", false, true, "otel.example.com:443", true},
      {"collector", false, false},
      {"[::1]", false, false},
      {"http://collector:4317/v1/traces", false, false},
      {"dns:///collector:4317", false, false},
      {"unix:///run/otel.sock", false, false},
  };
  for (const Case& c : cases) {
    absl::StatusOr<OtlpGrpcTarget> target = ParseOtlpGrpcEndpoint(c.endpoint, c.insecure);
    ASSERT_EQ(target.ok(), c.ok) << c.endpoint << ": " << target.status();
    if (!c.ok) {
      EXPECT_THAT(std::string(target.status().message()), HasSubstr(c.endpoint));
      continue;
    }
    EXPECT_EQ(target->authority, c.authority) << c.endpoint;
    EXPECT_EQ(target->tls, c.tls) << c.endpoint;
  }
}

// Verifies the codes of collectors' HTTP answers: overload and outage are kUnavailable.
TEST(HttpStatusToCodeTest, MapsStatuses) {
  EXPECT_EQ(HttpStatusToCode(503), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpStatusToCode(429), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpStatusToCode(502), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpStatusToCode(400), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpStatusToCode(401), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(HttpStatusToCode(403), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(HttpStatusToCode(404), absl::StatusCode::kNotFound);
  EXPECT_EQ(HttpStatusToCode(413), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(HttpStatusToCode(418), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(HttpStatusToCode(500), absl::StatusCode::kInternal);
  EXPECT_EQ(HttpStatusToCode(302), absl::StatusCode::kUnknown);
}

// An HTTP server that answers each request with the next of a script of raw responses (closing
// the connection after those marked so), one connection at a time: for the client's framing.
class ScriptedHttpServer {
 public:
  struct Answer {
    std::string bytes;
    bool close = false;
  };

  explicit ScriptedHttpServer(std::vector<Answer> script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), size), 0);
    EXPECT_EQ(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &size), 0);
    EXPECT_EQ(::listen(listen_fd_, 8), 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~ScriptedHttpServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    const int serving = serving_fd_.load();
    if (serving >= 0) {
      ::shutdown(serving, SHUT_RDWR);
    }
    thread_.join();
    ::close(listen_fd_);
  }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_, "/v1/traces"); }
  int connections() const { return connections_.load(); }

 private:
  void Run() {
    size_t next = 0;
    while (next < script_.size()) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        return;
      }
      ++connections_;
      serving_fd_.store(fd);
      std::string in;
      char buffer[16 * 1024];
      bool open = true;
      while (open && next < script_.size()) {
        // One request: headers, then the body Content-Length gives.
        size_t head_end = 0;
        while (open && (head_end = in.find("\r\n\r\n")) == std::string::npos) {
          const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
          open = n > 0;
          in.append(buffer, n > 0 ? static_cast<size_t>(n) : 0);
        }
        if (!open) {
          break;
        }
        const std::string head = absl::AsciiStrToLower(in.substr(0, head_end));
        const size_t at = head.find("content-length: ");
        size_t length = 0;
        (void)absl::SimpleAtoi(head.substr(at + 16, head.find("\r\n", at) - at - 16), &length);
        while (open && in.size() < head_end + 4 + length) {
          const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
          open = n > 0;
          in.append(buffer, n > 0 ? static_cast<size_t>(n) : 0);
        }
        in.erase(0, head_end + 4 + length);
        const Answer& answer = script_[next++];
        (void)::send(fd, answer.bytes.data(), answer.bytes.size(), MSG_NOSIGNAL);
        open = open && !answer.close;
      }
      serving_fd_.store(-1);
      ::close(fd);
    }
  }

  const std::vector<Answer> script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> serving_fd_{-1};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// Verifies how the HTTP exporter takes answers however they are framed: a chunked error body
// (extensions, trailer) read to its end so the connection carries the next export; an interim
// 100 skipped; an HTTP/1.0 body delimited by the close, after which a new connection is made; a
// 204 without a body; a redirect reported, not followed (the next scripted answer goes to the next
// export); an error body kept only up to 256 bytes; and a reply that is not HTTP.
TEST(OtlpHttpExporterTest, ReadsEveryResponseFraming) {
  const std::string long_body(1000, 'x');
  ScriptedHttpServer server({
      {"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n"
       "4;note=x\r\nbad \r\n4\r\nspan\r\n0\r\nX-Trailer: 1\r\n\r\n"},
      {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
      {"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\naccepted", /*close=*/true},
      {"HTTP/1.1 204 No Content\r\n\r\n"},
      {"HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n"},
      {absl::StrCat("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\n",
                    long_body)},
      {"SSH-2.0-OpenSSH_9.2\r\n\r\n", /*close=*/true},
  });
  auto exporter = OtlpHttpExporter::Create(Options(server.url()));
  ASSERT_TRUE(exporter.ok()) << exporter.status();

  absl::Status status = (*exporter)->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("HTTP/1.1 400 Bad Request: bad span"));

  status = (*exporter)->Export(Spans(1));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(server.connections(), 1);

  status = (*exporter)->Export(Spans(1));
  EXPECT_TRUE(status.ok()) << status;
  status = (*exporter)->Export(Spans(1));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ((*exporter)->connections_made(), 2);

  status = (*exporter)->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("HTTP/1.1 307 Temporary Redirect"));

  status = (*exporter)->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("HTTP/1.1 503 Service Unavailable"));
  EXPECT_THAT(std::string(status.message()), HasSubstr(std::string(256, 'x')));
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr(std::string(257, 'x'))));

  status = (*exporter)->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("HTTP/0.9"));
  EXPECT_EQ(server.connections(), 2);
}

// A small HTTPS server: answers every request with 200 (and counts those that are export
// requests), one connection at a time. Listens on [::] dual-stack when it can, so that tests
// can reach it as ::1, an address its certificate does not name.
class TlsHttpServer {
 public:
  ~TlsHttpServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    const int serving = serving_fd_.load();
    if (serving >= 0) {
      ::shutdown(serving, SHUT_RDWR);
    }
    if (thread_.joinable()) {
      thread_.join();
    }
    ::close(listen_fd_);
    SSL_CTX_free(ctx_);
  }

  bool Start(const std::string& cert, const std::string& key) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    if (SSL_CTX_use_certificate_chain_file(ctx_, cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return false;
    }
    listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ >= 0) {
      const int off = 0;
      setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
      sockaddr_in6 address{};
      address.sin6_family = AF_INET6;
      address.sin6_addr = in6addr_any;
      socklen_t size = sizeof(address);
      dual_stack_ =
          ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
          ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &size) == 0;
      port_ = ntohs(address.sin6_port);
    }
    if (!dual_stack_) {
      if (listen_fd_ >= 0) {
        ::close(listen_fd_);
      }
      listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t size = sizeof(address);
      if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
          ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
        return false;
      }
      port_ = ntohs(address.sin_port);
    }
    if (::listen(listen_fd_, 8) != 0) {
      return false;
    }
    thread_ = std::thread([this] { Run(); });
    return true;
  }

  int port() const { return port_; }
  bool dual_stack() const { return dual_stack_; }
  int exports() const { return exports_.load(); }

 private:
  void Run() {
    while (true) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) {
          continue;
        }
        return;
      }
      serving_fd_.store(fd);
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, fd);
      if (SSL_accept(ssl) == 1) {
        Serve(ssl);
      }
      SSL_free(ssl);
      serving_fd_.store(-1);
      ::close(fd);
    }
  }

  void Serve(SSL* ssl) {
    std::string in;
    char buffer[16 * 1024];
    while (true) {
      size_t head_end = 0;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        const int n = SSL_read(ssl, buffer, sizeof(buffer));
        if (n <= 0) {
          return;
        }
        in.append(buffer, static_cast<size_t>(n));
      }
      size_t length = 0;
      const std::string head = absl::AsciiStrToLower(in.substr(0, head_end));
      const size_t at = head.find("content-length:");
      if (at != std::string::npos) {
        const size_t end = head.find("\r\n", at);
        (void)absl::SimpleAtoi(
            absl::StripAsciiWhitespace(head.substr(at + 15, end == std::string::npos
                                                                ? std::string::npos
                                                                : end - at - 15)),
            &length);
      }
      in.erase(0, head_end + 4);
      while (in.size() < length) {
        const int n = SSL_read(ssl, buffer, sizeof(buffer));
        if (n <= 0) {
          return;
        }
        in.append(buffer, static_cast<size_t>(n));
      }
      opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
      if (request.ParseFromString(in.substr(0, length))) {
        ++exports_;
      }
      in.erase(0, length);
      const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      if (SSL_write(ssl, answer.data(), static_cast<int>(answer.size())) <= 0) {
        return;
      }
    }
  }

  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  bool dual_stack_ = false;
  std::atomic<int> serving_fd_{-1};
  std::atomic<int> exports_{0};
  std::thread thread_;
};

class OtlpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The HTTPS server here writes with OpenSSL's socket BIO: a client gone must not kill the test.
    std::signal(SIGPIPE, SIG_IGN);
    dir_ = new testing::TempDir();
    ASSERT_TRUE(testing::MakeCa(dir_->path(), "ca").ok());
    ASSERT_TRUE(testing::MakeCa(dir_->path(), "other-ca").ok());
    const absl::Status made = testing::MakeCert(dir_->path(), "server", "ca");
    ASSERT_TRUE(made.ok()) << made;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const std::string& name) {
    return absl::StrCat(dir_->path(), "/", name);
  }

  static testing::TempDir* dir_;
};

testing::TempDir* OtlpTlsTest::dir_ = nullptr;

// Verifies OTLP/gRPC over TLS: the collector's certificate is checked against the CA file, and
// refused without it; a CA file that holds no certificate is refused at once.
TEST_F(OtlpTlsTest, GrpcExporterChecksTheCollectorsCertificate) {
  grpc::SslServerCredentialsOptions credentials;
  credentials.pem_key_cert_pairs.push_back(
      {testing::ReadWholeFile(File("server.key")), testing::ReadWholeFile(File("server.crt"))});
  auto collector = FakeOtlpCollector::Start(grpc::SslServerCredentials(credentials));
  ASSERT_TRUE(collector.ok()) << collector.status();
  // By address, as the certificate also names it: a name would go through gRPC's c-ares
  // resolver, whose allocations Debian's gRPC leaves behind at exit (LeakSanitizer fails the
  // test under ASan). The HTTP exporter's test below checks a name.
  const std::string endpoint = absl::StrCat("https://127.0.0.1:", (*collector)->grpc_port());

  OtlpExporterOptions options = Options(endpoint);
  options.ca_file = File("ca.crt");
  std::unique_ptr<SpanExporter> trusted = Make(Protocol::kGrpc, options);
  ASSERT_NE(trusted, nullptr);
  const absl::Status status = trusted->Export(Spans(2));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE((*collector)->WaitForSpans(2, kWait));

  options.ca_file = File("other-ca.crt");
  std::unique_ptr<SpanExporter> untrusted = Make(Protocol::kGrpc, options);
  ASSERT_NE(untrusted, nullptr);
  EXPECT_EQ(untrusted->Export(Spans(1)).code(), absl::StatusCode::kUnavailable);

  // A CA file without a certificate in it is refused when the exporter is made, as over HTTP.
  options.ca_file = File("server.key");
  const absl::Status refused = OtlpGrpcExporter::Create(options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_EQ(refused.message(), "--tracing_ca=" + File("server.key") + ": holds no PEM certificate");
}

// Verifies OTLP/HTTP over TLS: the server's certificate must chain to the CA file and name the
// host connected to, by DNS name or IP address.
TEST_F(OtlpTlsTest, HttpExporterChecksTheServersCertificateAndName) {
  TlsHttpServer server;
  ASSERT_TRUE(server.Start(File("server.crt"), File("server.key")));

  for (const std::string host : {"localhost", "127.0.0.1"}) {
    OtlpExporterOptions options =
        Options(absl::StrCat("https://", host, ":", server.port(), "/v1/traces"));
    options.ca_file = File("ca.crt");
    std::unique_ptr<SpanExporter> exporter = Make(Protocol::kHttp, options);
    ASSERT_NE(exporter, nullptr);
    const absl::Status status = exporter->Export(Spans(2));
    EXPECT_TRUE(status.ok()) << host << ": " << status;
  }
  EXPECT_EQ(server.exports(), 2);

  OtlpExporterOptions options =
      Options(absl::StrCat("https://localhost:", server.port(), "/v1/traces"));
  options.ca_file = File("other-ca.crt");
  std::unique_ptr<SpanExporter> untrusted = Make(Protocol::kHttp, options);
  ASSERT_NE(untrusted, nullptr);
  absl::Status status = untrusted->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("certificate"));

  // Without a CA file the system's trust store decides, and it does not know the test CA.
  options.ca_file = "";
  std::unique_ptr<SpanExporter> system_roots = Make(Protocol::kHttp, options);
  ASSERT_NE(system_roots, nullptr);
  status = system_roots->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("certificate"));

  // A CA file without a certificate in it is refused when the exporter is made.
  options.ca_file = File("server.key");
  const absl::Status refused = OtlpHttpExporter::Create(options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("server.key"));

  if (server.dual_stack()) {
    // ::1 is the same machine, but not a name the certificate carries.
    options = Options(absl::StrCat("https://[::1]:", server.port(), "/v1/traces"));
    options.ca_file = File("ca.crt");
    std::unique_ptr<SpanExporter> wrong_name = Make(Protocol::kHttp, options);
    ASSERT_NE(wrong_name, nullptr);
    status = wrong_name->Export(Spans(1));
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("target host name '::1'"));
  }
  EXPECT_EQ(server.exports(), 2);
}

// The proxy variables libcurl (and the exporter) read, set or unset for one test and restored
// after it.
class ScopedProxyEnvironment {
 public:
  static constexpr const char* kNames[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
                                           "HTTPS_PROXY", "all_proxy",  "ALL_PROXY",
                                           "no_proxy",    "NO_PROXY"};

  // Every proxy variable unset, then `set` set.
  explicit ScopedProxyEnvironment(std::vector<std::pair<std::string, std::string>> set) {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value == nullptr ? std::nullopt
                                                 : std::optional<std::string>(value));
      ::unsetenv(name);
    }
    for (const auto& [name, value] : set) {
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedProxyEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A forward HTTP proxy of the smallest kind, on loopback. For each connection it reads the first
// request's head: a CONNECT opens a tunnel to the host and port it names (https); any other
// request, in absolute form ("POST http://host:port/path HTTP/1.1"), goes to that origin with its
// target made a path. From then on it copies bytes both ways as they come, so a connection
// carries one origin's traffic. It records each connection's first request line.
class TinyProxy {
 public:
  TinyProxy() {
    const testing::LoopbackListener listener = testing::ListenOnLoopback(8);
    listen_fd_ = listener.fd;
    port_ = listener.port;
    accepter_ = std::thread([this] { Accept(); });
  }
  ~TinyProxy() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    accepter_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : open_) {
        ::shutdown(fd, SHUT_RDWR);
      }
    }
    for (std::thread& handler : handlers_) {
      handler.join();
    }
    ::close(listen_fd_);
  }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Accept() {
    while (true) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) {
          continue;
        }
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      open_.insert(fd);
      handlers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // A connection to host:port (host may be a bracketed IPv6 literal), or -1.
  static int Connect(const std::string& authority) {
    const size_t colon = authority.rfind(':');
    std::string host = authority.substr(0, colon);
    if (host.size() > 2 && host.front() == '[') {
      host = host.substr(1, host.size() - 2);
    }
    const std::string port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) {
      return -1;
    }
    int fd = -1;
    for (const addrinfo* address = found; address != nullptr && fd < 0;
         address = address->ai_next) {
      fd = ::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, address->ai_addr, address->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(found);
    return fd;
  }

  static bool SendAll(int fd, absl::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) {
        return false;
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  void Serve(int client) {
    std::string in;
    char buffer[16 * 1024];
    size_t head_end = 0;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(client, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        break;
      }
      in.append(buffer, static_cast<size_t>(n));
    }
    int upstream = -1;
    if (head_end != std::string::npos) {
      const std::string line = in.substr(0, in.find("\r\n"));
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(line);
      }
      const std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() == 3 && parts[0] == "CONNECT") {
        upstream = Connect(parts[1]);
        if (upstream >= 0 &&
            SendAll(client, "HTTP/1.1 200 Connection established\r\n\r\n")) {
          in.erase(0, head_end + 4);
        }
      } else if (parts.size() == 3 && absl::StartsWith(parts[1], "http://")) {
        const std::string target = parts[1].substr(7);
        const size_t slash = target.find('/');
        upstream = Connect(target.substr(0, slash));
        const std::string path = slash == std::string::npos ? "/" : target.substr(slash);
        in = absl::StrCat(parts[0], " ", path, " ", parts[2], in.substr(line.size()));
      }
    }
    if (upstream >= 0 && (in.empty() || SendAll(upstream, in))) {
      Copy(client, upstream);
    }
    if (upstream >= 0) {
      ::close(upstream);
    }
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(client);
    ::close(client);
  }

  // Copies bytes both ways until either side closes.
  static void Copy(int client, int upstream) {
    char buffer[16 * 1024];
    pollfd ready[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
    while (::poll(ready, 2, -1) > 0) {
      for (int i = 0; i < 2; ++i) {
        if (ready[i].revents == 0) {
          continue;
        }
        const ssize_t n = ::recv(ready[i].fd, buffer, sizeof(buffer), 0);
        if (n <= 0 ||
            !SendAll(ready[1 - i].fd, absl::string_view(buffer, static_cast<size_t>(n)))) {
          return;
        }
      }
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accepter_;
  mutable std::mutex mu_;
  std::set<int> open_;
  std::vector<std::thread> handlers_;
  std::vector<std::string> requests_;
};

// Verifies that a proxy named by http_proxy or HTTP_PROXY carries the exports to an http://
// collector (here a dead one: nothing reaches the collector), and that NO_PROXY naming the
// collector's host keeps them direct whatever the proxy variables say.
TEST(OtlpHttpExporterTest, ProxyVariablesAndNoProxy) {
  auto collector = FakeOtlpCollector::Start();
  ASSERT_TRUE(collector.ok()) << collector.status();
  const int dead_port = testing::FreePort();
  const std::string dead_proxy = absl::StrCat("http://127.0.0.1:", dead_port);
  for (const char* variable : {"http_proxy", "HTTP_PROXY", "ALL_PROXY"}) {
    {
      ScopedProxyEnvironment environment({{variable, dead_proxy}});
      auto exporter = OtlpHttpExporter::Create(Options((*collector)->http_endpoint()));
      ASSERT_TRUE(exporter.ok()) << exporter.status();
      const absl::Status status = (*exporter)->Export(Spans(1));
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << variable << ": " << status;
      // The proxy's port, not the collector's: the export went to the proxy.
      EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("port ", dead_port)));
    }
    for (const char* no_proxy : {"127.0.0.1", "localhost,127.0.0.0/8", "*"}) {
      ScopedProxyEnvironment environment({{variable, dead_proxy}, {"NO_PROXY", no_proxy}});
      auto exporter = OtlpHttpExporter::Create(Options((*collector)->http_endpoint()));
      ASSERT_TRUE(exporter.ok()) << exporter.status();
      const absl::Status status = (*exporter)->Export(Spans(1));
      EXPECT_TRUE(status.ok()) << variable << ", NO_PROXY=" << no_proxy << ": " << status;
    }
  }
  // An https proxy is not one for an http:// collector.
  ScopedProxyEnvironment environment({{"HTTPS_PROXY", dead_proxy}});
  auto exporter = OtlpHttpExporter::Create(Options((*collector)->http_endpoint()));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const absl::Status status = (*exporter)->Export(Spans(1));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ((*collector)->exports(), 10);
}

// Verifies that exports to an http:// collector go through the proxy HTTP_PROXY names, with the
// collector's URL as the target, and arrive whole.
TEST(OtlpHttpExporterTest, ExportsThroughAProxy) {
  auto collector = FakeOtlpCollector::Start();
  ASSERT_TRUE(collector.ok()) << collector.status();
  TinyProxy proxy;
  ScopedProxyEnvironment environment({{"HTTP_PROXY", proxy.url()}});
  auto exporter = OtlpHttpExporter::Create(Options((*collector)->http_endpoint()));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const absl::Status status = (*exporter)->Export(Spans(3));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE((*collector)->WaitForSpans(3, kWait));
  EXPECT_THAT(proxy.requests(),
              ::testing::ElementsAre(absl::StrCat("POST ", (*collector)->http_endpoint(),
                                                  " HTTP/1.1")));
  const auto exports = (*collector)->Exports();
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(Header(exports[0], "x-tenant"), "blue");
}

// Verifies that exports to an https:// collector go through the tunnel (CONNECT) of the proxy
// HTTPS_PROXY names, the collector's certificate still checked end to end.
TEST_F(OtlpTlsTest, HttpExporterTunnelsThroughAProxy) {
  TlsHttpServer server;
  ASSERT_TRUE(server.Start(File("server.crt"), File("server.key")));
  TinyProxy proxy;
  ScopedProxyEnvironment environment({{"HTTPS_PROXY", proxy.url()}});
  OtlpExporterOptions options =
      Options(absl::StrCat("https://localhost:", server.port(), "/v1/traces"));
  options.ca_file = File("ca.crt");
  std::unique_ptr<SpanExporter> exporter = Make(Protocol::kHttp, options);
  ASSERT_NE(exporter, nullptr);
  absl::Status status = exporter->Export(Spans(2));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(server.exports(), 1);
  exporter.reset();  // the server serves one connection at a time

  options.ca_file = File("other-ca.crt");
  std::unique_ptr<SpanExporter> untrusted = Make(Protocol::kHttp, options);
  ASSERT_NE(untrusted, nullptr);
  status = untrusted->Export(Spans(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("certificate"));
  EXPECT_EQ(server.exports(), 1);
  const std::string connect = absl::StrCat("CONNECT localhost:", server.port(), " HTTP/1.1");
  EXPECT_THAT(proxy.requests(), ::testing::ElementsAre(connect, connect));
}

}  // namespace
}  // namespace sluice
