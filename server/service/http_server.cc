#include "server/service/http_server.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/string_view.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "server/common/clock.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

void Reply(evhttp_request* req, int code, absl::string_view reason, absl::string_view content_type,
           absl::string_view body) {
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                    std::string(content_type).c_str());
  evbuffer* buf = evbuffer_new();
  evbuffer_add(buf, body.data(), body.size());
  evhttp_send_reply(req, code, std::string(reason).c_str(), buf);
  evbuffer_free(buf);
}

std::string BodyOf(evhttp_request* req) {
  evbuffer* in = evhttp_request_get_input_buffer(req);
  std::string body(evbuffer_get_length(in), '\0');
  evbuffer_copyout(in, body.data(), body.size());
  return body;
}

// A /json call whose decision may finish on a backend thread.
struct JsonCall {
  evhttp_request* req;
  RateLimiter::Request request;
  RateLimiter::Response response;
  absl::Status status;
  MetricHistogram* latency;  // sluice_request_duration_seconds{transport="http"}
  int64_t arrived_us;
};

void FinishJson(evutil_socket_t, short, void* arg) {
  std::unique_ptr<JsonCall> call(static_cast<JsonCall*>(arg));
  call->latency->Record(RealClock::Get().MonotonicMicros() - call->arrived_us);
  if (!call->status.ok()) {
    Reply(call->req, call->status.code() == absl::StatusCode::kInvalidArgument ? 400 : 500,
          "Error", "text/plain", absl::StrCat(call->status.message(), "\n"));
    return;
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(call->response, &json, options);
  bool over = call->response.overall_code() == RateLimiter::Response::OVER_LIMIT;
  // The headers Envoy would add to its client's response (retry-after on a 429, and the
  // RateLimit headers when enabled) go on this response too.
  evkeyvalq* headers = evhttp_request_get_output_headers(call->req);
  for (const auto& header : call->response.response_headers_to_add()) {
    evhttp_add_header(headers, header.key().c_str(), header.value().c_str());
  }
  Reply(call->req, over ? 429 : 200, over ? "Too Many Requests" : "OK", "application/json",
        json + "\n");
}

}  // namespace

HttpServer::HttpServer(RateLimiter& limiter, const ConfigStore& config, const Backend& backend,
                       Metrics& metrics, HttpServerOptions options)
    : limiter_(limiter),
      config_(config),
      backend_(backend),
      metrics_(metrics),
      options_(options) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Bind(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP address '", address,
                                                   "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  evhttp_bound_socket* bound = evhttp_bind_socket_with_handle(http_, host.c_str(), port);
  if (bound == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on HTTP address ", address, ": ",
                                               std::strerror(errno)));
  }
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  getsockname(evhttp_bound_socket_get_fd(bound), reinterpret_cast<sockaddr*>(&ss), &len);
  return ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

absl::Status HttpServer::Start(const std::string& address, const std::string& debug_address) {
  // Decisions complete on other threads and hand their reply to this base.
  static const int kThreads = evthread_use_pthreads();
  (void)kThreads;
  base_ = event_base_new();
  http_ = evhttp_new(base_);
  evhttp_set_allowed_methods(http_, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
  evhttp_set_max_body_size(http_, static_cast<ev_ssize_t>(options_.max_body_bytes));
  evhttp_set_max_headers_size(http_, static_cast<ev_ssize_t>(options_.max_header_bytes));
  evhttp_set_timeout(http_, options_.io_timeout_seconds);
  evhttp_set_gencb(http_, &HttpServer::Dispatch, this);
  absl::StatusOr<int> port = Bind(address);
  absl::StatusOr<int> debug_port = 0;
  if (port.ok() && !debug_address.empty()) {
    debug_port = Bind(debug_address);
  }
  if (!port.ok() || !debug_port.ok()) {
    evhttp_free(http_);
    event_base_free(base_);
    http_ = nullptr;
    base_ = nullptr;
    return port.ok() ? debug_port.status() : port.status();
  }
  port_ = *port;
  debug_port_ = *debug_port;
  thread_ = std::thread([this] { event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (base_ == nullptr) {
    return;
  }
  event_base_loopbreak(base_);
  if (thread_.joinable()) {
    thread_.join();
  }
  evhttp_free(http_);
  event_base_free(base_);
  http_ = nullptr;
  base_ = nullptr;
}

void HttpServer::Dispatch(evhttp_request* req, void* arg) {
  auto* self = static_cast<HttpServer*>(arg);
  const char* uri = evhttp_request_get_uri(req);
  absl::string_view path = uri ? uri : "/";
  path = path.substr(0, path.find('?'));
  const bool get = evhttp_request_get_command(req) == EVHTTP_REQ_GET;
  if (path == "/json") {
    if (get) {
      Reply(req, 405, "Method Not Allowed", "text/plain", "POST a RateLimitRequest as JSON\n");
      return;
    }
    self->HandleJson(req);
  } else if (path == "/healthz") {
    if (self->draining_.load()) {
      Reply(req, 503, "Service Unavailable", "text/plain", "draining\n");
    } else {
      Reply(req, 200, "OK", "text/plain", "OK\n");
    }
  } else if (path == "/healthcheck") {
    // envoyproxy/ratelimit's health check answers 500 when unhealthy; probes written for it
    // expect exactly that.
    std::shared_ptr<const Config> config = self->config_.Get();
    if (self->draining_.load()) {
      Reply(req, 500, "Internal Server Error", "text/plain", "draining\n");
    } else if (self->options_.healthy_requires_config &&
               (config == nullptr || config->domains().empty())) {
      Reply(req, 500, "Internal Server Error", "text/plain", "no domain loaded\n");
    } else {
      Reply(req, 200, "OK", "text/plain", "OK");
    }
  } else if (path == "/readyz") {
    // The body also says how many decisions fell to the failure policy, by reason.
    const std::string failures = self->metrics_.BackendFailureSummary();
    const std::string detail =
        failures.empty() ? "" : absl::StrCat("failure policy decisions: ", failures, "\n");
    if (self->backend_.Ready() && !self->draining_.load()) {
      Reply(req, 200, "OK", "text/plain", absl::StrCat("OK\n", detail));
    } else {
      Reply(req, 503, "Service Unavailable", "text/plain",
            absl::StrCat("backend ", self->backend_.Name(), " not ready\n", detail));
    }
  } else if (path == "/config" || path == "/rlconfig") {
    std::shared_ptr<const Config> config = self->config_.Get();
    Reply(req, 200, "OK", "text/plain", config == nullptr ? std::string() : config->Dump());
  } else if (path == "/metrics") {
    std::string text = self->metrics_.Serialize();
    self->backend_.AppendMetrics(&text);
    Reply(req, 200, "OK", "text/plain; version=0.0.4", text);
  } else {
    Reply(req, 404, "Not Found", "text/plain",
          "not found; try POST /json, /healthz, /healthcheck, /readyz, /config, /rlconfig or "
          "/metrics\n");
  }
}

void HttpServer::HandleJson(evhttp_request* req) {
  auto call = std::make_unique<JsonCall>();
  call->req = req;
  call->latency = &metrics_.RequestLatency(Transport::kHttp);
  call->arrived_us = RealClock::Get().MonotonicMicros();
  google::protobuf::util::JsonParseOptions options;
  auto parsed = google::protobuf::util::JsonStringToMessage(BodyOf(req), &call->request, options);
  if (!parsed.ok()) {
    call->latency->Record(RealClock::Get().MonotonicMicros() - call->arrived_us);
    Reply(req, 400, "Bad Request", "text/plain",
          absl::StrCat("invalid RateLimitRequest JSON: ", parsed.message().as_string(), "\n"));
    return;
  }
  JsonCall* raw = call.release();
  event_base* base = base_;
  limiter_.ShouldRateLimit(raw->request, &raw->response, [raw, base](absl::Status status) {
    raw->status = std::move(status);
    // Reply on the HTTP thread, even when the decision finished elsewhere.
    timeval now{0, 0};
    event_base_once(base, -1, EV_TIMEOUT, &FinishJson, raw, &now);
  });
}

}  // namespace sluice
