#include "tests/support/fake_otlp_collector.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/mutex.h"

namespace sluice::testing {

namespace collector = ::opentelemetry::proto::collector::trace::v1;

// What both protocols share: the mode, and what was received.
class FakeOtlpCollector::State {
 public:
  void Arrived(Protocol protocol, const collector::ExportTraceServiceRequest& request,
               std::multimap<std::string, std::string> headers) {
    MutexLock lock(mu_);
    exports_.push_back({protocol, request, std::move(headers)});
    changed_.NotifyAll();
  }

  // The mode to answer in: waits while it is kStall, until it changes, the collector stops
  // (kFail), or `cancelled` says the client has gone (kStall).
  Mode Answer(const std::function<bool()>& cancelled) {
    MutexLock lock(mu_);
    while (mode_ == Mode::kStall && !stopping_ && !cancelled()) {
      changed_.WaitFor(mu_, 10000);
    }
    return stopping_ ? Mode::kFail : mode_;
  }

  // Records the spans of an accepted request; returns the answer to send.
  collector::ExportTraceServiceResponse Accepted(
      Protocol protocol, const collector::ExportTraceServiceRequest& request) {
    MutexLock lock(mu_);
    for (const auto& resource_spans : request.resource_spans()) {
      for (const auto& scope_spans : resource_spans.scope_spans()) {
        for (const auto& span : scope_spans.spans()) {
          spans_.push_back({protocol, resource_spans.resource(), resource_spans.schema_url(),
                            scope_spans.scope(), span});
        }
      }
    }
    changed_.NotifyAll();
    collector::ExportTraceServiceResponse response;
    if (rejected_spans_ > 0) {
      response.mutable_partial_success()->set_rejected_spans(rejected_spans_);
      response.mutable_partial_success()->set_error_message(rejection_message_);
    }
    return response;
  }

  void SetMode(Mode mode) {
    MutexLock lock(mu_);
    mode_ = mode;
    changed_.NotifyAll();
  }
  void SetPartialSuccess(int64_t rejected_spans, std::string message) {
    MutexLock lock(mu_);
    rejected_spans_ = rejected_spans;
    rejection_message_ = std::move(message);
  }
  void Stop() {
    MutexLock lock(mu_);
    stopping_ = true;
    changed_.NotifyAll();
  }

  std::vector<ReceivedSpan> Spans() {
    MutexLock lock(mu_);
    return spans_;
  }
  std::vector<Export> Exports() {
    MutexLock lock(mu_);
    return exports_;
  }
  int exports() {
    MutexLock lock(mu_);
    return static_cast<int>(exports_.size());
  }
  // True once `done(spans received, requests arrived)`, waiting up to `timeout`.
  bool WaitFor(absl::Duration timeout, const std::function<bool(size_t, size_t)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    MutexLock lock(mu_);
    while (!done(spans_.size(), exports_.size())) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      changed_.WaitUntil(mu_, deadline);
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar changed_;
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kOk;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t rejected_spans_ ABSL_GUARDED_BY(mu_) = 0;
  std::string rejection_message_ ABSL_GUARDED_BY(mu_);
  std::vector<Export> exports_ ABSL_GUARDED_BY(mu_);
  std::vector<ReceivedSpan> spans_ ABSL_GUARDED_BY(mu_);
};

class FakeOtlpCollector::GrpcService final : public collector::TraceService::Service {
 public:
  explicit GrpcService(State& state) : state_(state) {}

  grpc::Status Export(grpc::ServerContext* context,
                      const collector::ExportTraceServiceRequest* request,
                      collector::ExportTraceServiceResponse* response) override {
    std::multimap<std::string, std::string> headers;
    for (const auto& [key, value] : context->client_metadata()) {
      headers.emplace(std::string(key.data(), key.size()), std::string(value.data(), value.size()));
    }
    state_.Arrived(Protocol::kGrpc, *request, std::move(headers));
    switch (state_.Answer([context] { return context->IsCancelled(); })) {
      case Mode::kOk:
        *response = state_.Accepted(Protocol::kGrpc, *request);
        return grpc::Status::OK;
      case Mode::kFail:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake collector: failing");
      case Mode::kStall:
        break;
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client has gone");
  }

 private:
  State& state_;
};

// OTLP/HTTP over plain sockets: a thread accepting, and a thread for each connection.
class FakeOtlpCollector::HttpServer {
 public:
  explicit HttpServer(State& state) : state_(state) {}
  ~HttpServer() { Stop(); }

  // Listens on 127.0.0.1 (a port the kernel picks: no race with other tests); returns the port.
  absl::StatusOr<int> Start() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::listen(listen_fd_, 64) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0 ||
        ::pipe2(wake_, O_CLOEXEC) != 0) {
      return absl::UnavailableError(absl::StrCat("fake OTLP/HTTP server: ", strerror(errno)));
    }
    accepter_ = std::thread([this] { Accept(); });
    return ntohs(address.sin_port);
  }

  void CloseConnections() {
    MutexLock lock(mu_);
    for (int fd : open_) {
      ::shutdown(fd, SHUT_RDWR);
    }
  }

  int connections() {
    MutexLock lock(mu_);
    return accepted_;
  }

  void Stop() {
    {
      MutexLock lock(mu_);
      if (stopped_) {
        return;
      }
      stopped_ = true;
      for (int fd : open_) {
        ::shutdown(fd, SHUT_RDWR);
      }
    }
    if (accepter_.joinable()) {
      (void)!::write(wake_[1], "x", 1);
      accepter_.join();
    }
    std::vector<std::thread> handlers;
    {
      MutexLock lock(mu_);
      handlers.swap(handlers_);
    }
    for (std::thread& handler : handlers) {
      handler.join();
    }
    for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    listen_fd_ = wake_[0] = wake_[1] = -1;
  }

 private:
  void Accept() {
    while (true) {
      pollfd ready[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (::poll(ready, 2, -1) < 0 && errno != EINTR) {
        return;
      }
      if (ready[1].revents != 0) {
        return;
      }
      if (ready[0].revents == 0) {
        continue;
      }
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        continue;
      }
      MutexLock lock(mu_);
      if (stopped_) {
        ::close(fd);
        return;
      }
      ++accepted_;
      open_.insert(fd);
      handlers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Serves requests on `fd` until the client closes it or the server stops.
  void Serve(int fd) {
    std::string in;
    while (ServeOne(fd, in)) {
    }
    MutexLock lock(mu_);
    open_.erase(fd);
    ::close(fd);
  }

  // Reads more of the connection into `in`; false at its end.
  static bool Fill(int fd, std::string& in) {
    char buffer[16 * 1024];
    while (true) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        in.append(buffer, static_cast<size_t>(n));
        return true;
      }
      if (n == 0 || errno != EINTR) {
        return false;
      }
    }
  }

  static bool Send(int fd, absl::string_view status, absl::string_view content_type,
                   absl::string_view body) {
    std::string response =
        absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                     "\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
    absl::string_view left = response;
    while (!left.empty()) {
      const ssize_t n = ::send(fd, left.data(), left.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return false;
      }
      left.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // One request and its answer; false when the connection is to end.
  bool ServeOne(int fd, std::string& in) {
    size_t head_end = 0;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (in.size() > 64 * 1024 || !Fill(fd, in)) {
        return false;
      }
    }
    const std::string head = in.substr(0, head_end);
    in.erase(0, head_end + 4);
    std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
    std::vector<std::string> request_line = absl::StrSplit(lines[0], ' ');
    std::multimap<std::string, std::string> headers;
    size_t length = 0;
    bool close = false;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) {
        Send(fd, "400 Bad Request", "text/plain", "a header without a colon");
        return false;
      }
      std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
      std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
      if (name == "content-length" && !absl::SimpleAtoi(value, &length)) {
        Send(fd, "400 Bad Request", "text/plain", "bad Content-Length");
        return false;
      }
      if (name == "connection" && absl::AsciiStrToLower(value) == "close") {
        close = true;
      }
      headers.emplace(std::move(name), std::move(value));
    }
    while (in.size() < length) {
      if (!Fill(fd, in)) {
        return false;
      }
    }
    const std::string body = in.substr(0, length);
    in.erase(0, length);

    if (request_line.size() != 3 || request_line[2] != "HTTP/1.1") {
      Send(fd, "400 Bad Request", "text/plain", "not an HTTP/1.1 request line");
      return false;
    }
    if (request_line[1] != "/v1/traces") {
      return Send(fd, "404 Not Found", "text/plain", "no such path") && !close;
    }
    if (request_line[0] != "POST") {
      return Send(fd, "405 Method Not Allowed", "text/plain", "POST only") && !close;
    }
    const auto type = headers.find("content-type");
    if (type == headers.end() || type->second != "application/x-protobuf") {
      return Send(fd, "415 Unsupported Media Type", "text/plain", "application/x-protobuf only") &&
             !close;
    }
    collector::ExportTraceServiceRequest request;
    if (!request.ParseFromString(body)) {
      return Send(fd, "400 Bad Request", "text/plain", "not an ExportTraceServiceRequest") &&
             !close;
    }
    state_.Arrived(Protocol::kHttp, request, std::move(headers));
    if (state_.Answer([] { return false; }) != Mode::kOk) {
      return Send(fd, "503 Service Unavailable", "text/plain", "fake collector: failing") &&
             !close;
    }
    const std::string answer = state_.Accepted(Protocol::kHttp, request).SerializeAsString();
    return Send(fd, "200 OK", "application/x-protobuf", answer) && !close;
  }

  State& state_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread accepter_;
  Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;
  // Connections being served; a handler closes its descriptor only after removing it here, so
  // shutdown(2) from another thread never reaches a reused descriptor.
  std::set<int> open_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> handlers_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<FakeOtlpCollector>> FakeOtlpCollector::Start(
    std::shared_ptr<grpc::ServerCredentials> grpc_credentials) {
  std::unique_ptr<FakeOtlpCollector> collector(new FakeOtlpCollector());
  collector->state_ = std::make_unique<State>();
  collector->grpc_service_ = std::make_unique<GrpcService>(*collector->state_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      "127.0.0.1:0",
      grpc_credentials != nullptr ? grpc_credentials : grpc::InsecureServerCredentials(),
      &collector->grpc_port_);
  builder.RegisterService(collector->grpc_service_.get());
  collector->grpc_server_ = builder.BuildAndStart();
  if (collector->grpc_server_ == nullptr || collector->grpc_port_ == 0) {
    return absl::UnavailableError("fake OTLP collector: the gRPC server cannot listen");
  }
  collector->http_server_ = std::make_unique<HttpServer>(*collector->state_);
  absl::StatusOr<int> http_port = collector->http_server_->Start();
  if (!http_port.ok()) {
    return http_port.status();
  }
  collector->http_port_ = *http_port;
  return collector;
}

FakeOtlpCollector::~FakeOtlpCollector() { Stop(); }

void FakeOtlpCollector::Stop() {
  if (state_ == nullptr) {
    return;
  }
  state_->Stop();
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    grpc_server_->Wait();
    grpc_server_.reset();
  }
  if (http_server_ != nullptr) {
    http_server_->Stop();
  }
}

std::string FakeOtlpCollector::grpc_endpoint() const {
  return absl::StrCat("http://127.0.0.1:", grpc_port_);
}

std::string FakeOtlpCollector::http_endpoint() const {
  return absl::StrCat("http://127.0.0.1:", http_port_, "/v1/traces");
}

void FakeOtlpCollector::SetMode(Mode mode) { state_->SetMode(mode); }

void FakeOtlpCollector::SetPartialSuccess(int64_t rejected_spans, std::string message) {
  state_->SetPartialSuccess(rejected_spans, std::move(message));
}

void FakeOtlpCollector::CloseHttpConnections() { http_server_->CloseConnections(); }

std::vector<FakeOtlpCollector::ReceivedSpan> FakeOtlpCollector::Spans() const {
  return state_->Spans();
}

std::vector<FakeOtlpCollector::Export> FakeOtlpCollector::Exports() const {
  return state_->Exports();
}

bool FakeOtlpCollector::WaitForSpans(size_t n, absl::Duration timeout) const {
  return state_->WaitFor(timeout, [n](size_t spans, size_t) { return spans >= n; });
}

bool FakeOtlpCollector::WaitForExports(int n, absl::Duration timeout) const {
  return state_->WaitFor(timeout,
                         [n](size_t, size_t exports) { return static_cast<int>(exports) >= n; });
}

int FakeOtlpCollector::exports() const { return state_->exports(); }

int FakeOtlpCollector::http_connections() const { return http_server_->connections(); }

}  // namespace sluice::testing
