#include "server/service/http_server.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/util/json_util.h"
#include "server/common/clock.h"
#include "server/common/logging.h"
#include "server/service/admin_auth.h"
#include "server/service/http_reply.h"
#include "server/service/http_status.h"
#include "server/service/json_request_check.h"

namespace sluice {
namespace {

// Every method libevent 2.1 parses. All reach Dispatch, which answers 405 (with Allow) for one
// a path does not take; libevent itself answers a method it does not know with 501.
constexpr ev_uint16_t kKnownMethods = EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                      EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                      EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH;

absl::string_view MethodName(evhttp_cmd_type method) {
  switch (method) {
    case EVHTTP_REQ_GET:
      return "GET";
    case EVHTTP_REQ_POST:
      return "POST";
    case EVHTTP_REQ_HEAD:
      return "HEAD";
    case EVHTTP_REQ_PUT:
      return "PUT";
    case EVHTTP_REQ_DELETE:
      return "DELETE";
    case EVHTTP_REQ_OPTIONS:
      return "OPTIONS";
    case EVHTTP_REQ_TRACE:
      return "TRACE";
    case EVHTTP_REQ_CONNECT:
      return "CONNECT";
    case EVHTTP_REQ_PATCH:
      return "PATCH";
  }
  return "this method";
}

// libevent's own messages (accept errors, failed connection set-ups) through the project's log,
// at most once per 10 s each kind: by default libevent writes every one to stderr.
void LogLibeventMessage(int severity, const char* message) {
  if (severity >= EVENT_LOG_WARN) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10) << "libevent: " << message;
  } else if (severity == EVENT_LOG_MSG) {
    SLUICE_LOG_EVERY_SECONDS(INFO, 10) << "libevent: " << message;
  } else {
    SLUICE_LOG(DEBUG) << "libevent: " << message;
  }
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
  Span span;  // when traced
};

std::optional<TraceContext> CallerContext(evhttp_request* req) {
  evkeyvalq* headers = evhttp_request_get_input_headers(req);
  return ExtractTraceContext([headers](absl::string_view name) -> std::optional<absl::string_view> {
    // libevent matches header names without regard to case.
    const char* value = evhttp_find_header(headers, std::string(name).c_str());
    if (value == nullptr) {
      return std::nullopt;
    }
    return absl::string_view(value);
  });
}

// Ends a /json call's span with the HTTP status it is answered with.
void EndSpan(Span& span, int code, absl::string_view error) {
  if (!span.active()) {
    return;
  }
  span.Add("http.response.status_code", static_cast<int64_t>(code));
  if (!error.empty()) {
    span.SetError(error);
  }
  span.End();
}

void FinishJson(evutil_socket_t, short, void* arg) {
  std::unique_ptr<JsonCall> call(static_cast<JsonCall*>(arg));
  call->latency->Record(RealClock::Get().MonotonicMicros() - call->arrived_us);
  if (!call->status.ok()) {
    // The code a gRPC client would get, as HTTP (UNAVAILABLE while no config is loaded: 503).
    const HttpStatus status = HttpStatusFromCode(call->status.code());
    EndSpan(call->span, status.code, call->status.message());
    Reply(call->req, status.code, status.reason, "text/plain",
          absl::StrCat(absl::StatusCodeToString(call->status.code()), ": ",
                       call->status.message(), "\n"));
    return;
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(call->response, &json, options);
  bool over = call->response.overall_code() == RateLimiter::Response::OVER_LIMIT;
  EndSpan(call->span, over ? 429 : 200, "");
  // The headers Envoy would add to its client's response (retry-after on a 429, and the
  // RateLimit headers when enabled) go on this response too.
  evkeyvalq* headers = evhttp_request_get_output_headers(call->req);
  for (const auto& header : call->response.response_headers_to_add()) {
    evhttp_add_header(headers, header.key().c_str(), header.value().c_str());
  }
  Reply(call->req, over ? 429 : 200, over ? "Too Many Requests" : "OK", "application/json",
        json + "\n");
}

enum class Endpoint {
  kJson, kHealthz, kHealthcheck, kReadyz, kConfig, kMetrics, kQuota, kIndex, kAdminInspect,
  kAdminReset
};

// The endpoints that take POST (a RateLimitRequest as JSON); the others take GET and HEAD.
bool TakesPost(Endpoint endpoint) {
  return endpoint == Endpoint::kJson || endpoint == Endpoint::kAdminInspect ||
         endpoint == Endpoint::kAdminReset;
}

struct Route {
  absl::string_view path;
  Endpoint endpoint;
  absl::string_view help;  // the index's line for it
};

// Sorted by path: the index lists them in this order.
constexpr Route kRoutes[] = {
    {"/", Endpoint::kIndex, "this list"},
    {"/admin/inspect", Endpoint::kAdminInspect,
     "POST a RateLimitRequest as JSON: its rules, their stored state and cache entries "
     "(--admin_api)"},
    {"/admin/reset", Endpoint::kAdminReset,
     "POST a RateLimitRequest as JSON: delete its rules' state, here and for every replica "
     "(--admin_api)"},
    {"/config", Endpoint::kConfig, "the rules in force, one per line"},
    {"/healthcheck", Endpoint::kHealthcheck,
     "200 OK while healthy, 500 otherwise (envoyproxy/ratelimit's health check)"},
    {"/healthz", Endpoint::kHealthz, "200 OK while serving, 503 once draining"},
    {"/json", Endpoint::kJson, "POST a RateLimitRequest as JSON, get its RateLimitResponse"},
    {"/metrics", Endpoint::kMetrics, "metrics in Prometheus text format"},
    {"/readyz", Endpoint::kReadyz, "200 while calls can be decided, 503 saying why not"},
    // Upstream's text for it.
    {"/rlconfig", Endpoint::kConfig,
     "print out the currently loaded configuration for debugging"},
    {"/rlqs", Endpoint::kQuota, "the quota streams (RLQS) and their buckets"},
};

// The admin API's endpoints are listed only while it is on (off, they answer 404).
std::string EndpointIndex(bool admin) {
  std::string index;
  for (const Route& route : kRoutes) {
    if (!admin && (route.endpoint == Endpoint::kAdminInspect ||
                   route.endpoint == Endpoint::kAdminReset)) {
      continue;
    }
    absl::StrAppend(&index, route.path, ": ", route.help, "\n");
  }
  return index;
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

absl::Status HttpServer::Start(const std::string& address, const std::string& debug_address,
                              bool debug_required) {
  // Decisions and /config pages complete on other threads and hand their reply to this base.
  static const int kThreads = evthread_use_pthreads();
  (void)kThreads;
  static const bool kLogRouted = (event_set_log_callback(&LogLibeventMessage), true);
  (void)kLogRouted;
  base_ = event_base_new();
  http_ = evhttp_new(base_);
  evhttp_set_allowed_methods(http_, kKnownMethods);
  evhttp_set_max_body_size(http_, static_cast<ev_ssize_t>(options_.max_body_bytes));
  evhttp_set_max_headers_size(http_, static_cast<ev_ssize_t>(options_.max_header_bytes));
  evhttp_set_timeout(http_, options_.io_timeout_seconds);
  evhttp_set_gencb(http_, &HttpServer::Dispatch, this);
  connections_ = std::make_unique<HttpConnections>(
      base_, http_,
      HttpConnectionLimits{.max_connections = options_.max_connections,
                           .request_timeout = options_.request_timeout,
                           .answer_timeout = options_.answer_timeout});
  config_pages_ = std::make_unique<ConfigDumpCache>(options_.config_dump_max_bytes);
  metrics_pages_ = std::make_unique<ScrapeCache>(
      [this] { return RenderMetrics(); },
      ScrapeCache::Options{.max_age = options_.metrics_max_age});
  mailbox_ = std::make_unique<LoopMailbox>(base_);
  absl::StatusOr<int> port = connections_->Listen(address, "--http_address");
  absl::StatusOr<int> debug_port = 0;
  if (port.ok() && !debug_address.empty()) {
    debug_port = connections_->Listen(debug_address, "--debug_address");
    if (!debug_port.ok() && !debug_required) {
      SLUICE_LOG(WARNING) << "serving without the debug address: " << debug_port.status().message()
                          << " (--debug_address_required=false: only logged, as "
                             "envoyproxy/ratelimit logs it)";
      debug_port = 0;
    }
  }
  if (!port.ok() || !debug_port.ok()) {
    Release();
    return port.ok() ? debug_port.status() : port.status();
  }
  port_ = *port;
  debug_port_ = *debug_port;
  thread_ = std::thread([this] {
    connections_->BindToThisThread();
    event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY);
  });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (base_ == nullptr) {
    return;
  }
  // Not loopbreak: a loop that has not started yet would clear its flag and run on. The exit is
  // an event, handled whenever the loop runs.
  event_base_loopexit(base_, nullptr);
  if (thread_.joinable()) {
    thread_.join();
  }
  Release();
}

void HttpServer::Release() {
  // The renderers first: their callbacks post to the mailbox.
  config_pages_.reset();
  metrics_pages_.reset();
  connections_->Shutdown();
  evhttp_free(http_);  // closes every connection; their close callbacks reach connections_
  connections_.reset();
  mailbox_.reset();  // pages not sent yet: their requests went with their connections
  event_base_free(base_);
  http_ = nullptr;
  base_ = nullptr;
}

void HttpServer::Dispatch(evhttp_request* req, void* arg) {
  auto* self = static_cast<HttpServer*>(arg);
  self->connections_->RequestArrived(req);
  const char* uri = evhttp_request_get_uri(req);
  absl::string_view path = uri ? uri : "/";
  path = path.substr(0, path.find('?'));
  const Route* route = nullptr;
  for (const Route& candidate : kRoutes) {
    if (candidate.path == path) {
      route = &candidate;
    }
  }
  if (route == nullptr) {
    Reply(req, 404, "Not Found", "text/plain",
          "not found; try POST /json, /healthz, /healthcheck, /readyz, /config, /rlconfig, "
          "/metrics or /rlqs (GET / lists them)\n");
    return;
  }
  const bool admin_route =
      route->endpoint == Endpoint::kAdminInspect || route->endpoint == Endpoint::kAdminReset;
  if (admin_route && self->options_.admin == nullptr) {
    Reply(req, 404, "Not Found", "text/plain",
          "the admin API is off: start sluice with --admin_api (and --admin_token_file, unless "
          "its HTTP addresses are loopback only)\n");
    return;
  }
  const evhttp_cmd_type method = evhttp_request_get_command(req);
  const bool json = TakesPost(route->endpoint);
  const bool allowed =
      json ? method == EVHTTP_REQ_POST : (method == EVHTTP_REQ_GET || method == EVHTTP_REQ_HEAD);
  if (!allowed) {
    const absl::string_view allow = json ? "POST" : "GET, HEAD";
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                      std::string(allow).c_str());
    Reply(req, 405, "Method Not Allowed", "text/plain",
          absl::StrCat(MethodName(method), " is not allowed on ", path, "; use ", allow,
                       json ? " with a RateLimitRequest as JSON" : "", "\n"));
    return;
  }
  switch (route->endpoint) {
    case Endpoint::kJson:
      self->HandleJson(req);
      return;
    case Endpoint::kAdminInspect:
    case Endpoint::kAdminReset:
      self->HandleAdmin(req, route->endpoint == Endpoint::kAdminReset);
      return;
    case Endpoint::kHealthz:
      if (self->draining_.load()) {
        Reply(req, 503, "Service Unavailable", "text/plain", "draining\n");
      } else {
        Reply(req, 200, "OK", "text/plain", "OK\n");
      }
      return;
    case Endpoint::kHealthcheck: {
      // envoyproxy/ratelimit's health check answers 500 when unhealthy; probes written for it
      // expect exactly that.
      std::shared_ptr<const Config> config = self->config_.Get();
      if (self->draining_.load()) {
        Reply(req, 500, "Internal Server Error", "text/plain", "draining\n");
      } else if (self->waiting_for_backend_.load()) {
        Reply(req, 500, "Internal Server Error", "text/plain",
              "waiting for the backend's first answer\n");
      } else if (self->options_.healthy_requires_config &&
                 (config == nullptr || config->domains().empty())) {
        Reply(req, 500, "Internal Server Error", "text/plain", "no domain loaded\n");
      } else {
        Reply(req, 200, "OK", "text/plain", "OK");
      }
      return;
    }
    case Endpoint::kReadyz:
      self->HandleReadyz(req);
      return;
    case Endpoint::kConfig:
      self->HandleConfig(req);
      return;
    case Endpoint::kMetrics:
      self->HandleMetrics(req);
      return;
    case Endpoint::kIndex:
      Reply(req, 200, "OK", "text/plain", EndpointIndex(self->options_.admin != nullptr));
      return;
    case Endpoint::kQuota:
      if (self->options_.quota == nullptr) {
        Reply(req, 404, "Not Found", "text/plain", "the quota service is off (--rlqs=false)\n");
      } else {
        Reply(req, 200, "OK", "text/plain", self->options_.quota->Describe());
      }
      return;
  }
}

void HttpServer::HandleReadyz(evhttp_request* req) {
  // The body also says how many decisions fell to the failure policy, by reason.
  const std::string failures = metrics_.BackendFailureSummary();
  const std::string detail =
      failures.empty() ? "" : absl::StrCat("failure policy decisions: ", failures, "\n");
  std::string why;
  if (draining_.load()) {
    why = "draining\n";
  } else if (config_.Get() == nullptr) {
    why = "no config loaded: every call fails UNAVAILABLE until a valid one is loaded\n";
  } else if (!backend_.Ready()) {
    why = absl::StrCat("backend ", backend_.Name(), " not ready\n");
  }
  if (why.empty()) {
    Reply(req, 200, "OK", "text/plain", absl::StrCat("OK\n", detail));
  } else {
    Reply(req, 503, "Service Unavailable", "text/plain", absl::StrCat(why, detail));
  }
}

void HttpServer::HandleConfig(evhttp_request* req) {
  // The page comes back on this thread when cached, else on the renderer's: either way it is
  // sent from the loop.
  config_pages_->Get(config_.Get(), [this, req](ConfigDumpCache::Page page) {
    mailbox_->Post([req, page = std::move(page)] { SendSharedPage(req, "text/plain", page); });
  });
}

std::string HttpServer::RenderMetrics() const {
  std::string text = metrics_.Serialize();
  backend_.AppendMetrics(&text);
  limiter_.AppendMetrics(&text);
  if (options_.tracer != nullptr) {
    options_.tracer->AppendMetrics(&text);
  }
  if (options_.quota != nullptr) {
    options_.quota->AppendMetrics(&text);
  }
  if (options_.admin != nullptr) {
    options_.admin->AppendMetrics(&text);
  }
  if (options_.reset_follower != nullptr) {
    options_.reset_follower->AppendMetrics(&text);
  }
  return text;
}

void HttpServer::HandleMetrics(evhttp_request* req) {
  // Rendered off this thread, at most once a second, shared by the scrapes that ask meanwhile;
  // the connection metrics are this thread's own, added as the page is sent.
  metrics_pages_->Get([this, req](ScrapeCache::Page page) {
    mailbox_->Post([this, req, page = std::move(page)] {
      std::string connections;
      connections_->AppendMetrics(&connections);
      SendSharedPage(req, "text/plain; version=0.0.4", page, connections);
    });
  });
}

void HttpServer::HandleJson(evhttp_request* req) {
  auto call = std::make_unique<JsonCall>();
  call->req = req;
  call->latency = &metrics_.RequestLatency(Transport::kHttp);
  call->arrived_us = RealClock::Get().MonotonicMicros();
  if (options_.tracer != nullptr) {
    call->span = options_.tracer->StartCall("POST /json", CallerContext(req));
    call->span.Add("http.request.method", "POST");
    call->span.Add("url.path", "/json");
  }
  // Checked before protobuf parses it: protobuf's parser is lenient, and slow on some shapes, on
  // the thread that also answers health checks (json_request_check.h).
  const std::string body = BodyOf(req);
  absl::Status parsed = CheckRateLimitRequestJson(body, options_.json_max_array_elements);
  if (parsed.ok()) {
    google::protobuf::util::JsonParseOptions options;
    auto status = google::protobuf::util::JsonStringToMessage(body, &call->request, options);
    if (!status.ok()) {
      parsed = absl::InvalidArgumentError(status.message().as_string());
    }
  }
  if (!parsed.ok()) {
    call->latency->Record(RealClock::Get().MonotonicMicros() - call->arrived_us);
    EndSpan(call->span, 400, "invalid RateLimitRequest JSON");
    Reply(req, 400, "Bad Request", "text/plain",
          absl::StrCat("invalid RateLimitRequest JSON: ", parsed.message(), "\n"));
    return;
  }
  JsonCall* raw = call.release();
  event_base* base = base_;
  limiter_.ShouldRateLimit(
      raw->request, &raw->response,
      [raw, base](absl::Status status) {
        raw->status = std::move(status);
        // Reply on the HTTP thread, even when the decision finished elsewhere.
        timeval now{0, 0};
        event_base_once(base, -1, EV_TIMEOUT, &FinishJson, raw, &now);
      },
      &raw->span);
}

// ---- The admin API.

namespace {

// "address:port" of the peer of `req`'s connection, for the audit line.
std::string PeerOf(evhttp_request* req) {
  evhttp_connection* connection = evhttp_request_get_connection(req);
  if (connection == nullptr) {
    return "unknown peer";
  }
  char* address = nullptr;
  ev_uint16_t port = 0;
  evhttp_connection_get_peer(connection, &address, &port);
  return absl::StrCat(address != nullptr ? address : "?", ":", port);
}

// An error as /json answers one: the gRPC code as HTTP, "CODE: message".
void ReplyError(evhttp_request* req, const absl::Status& status) {
  const HttpStatus http = HttpStatusFromCode(status.code());
  Reply(req, http.code, http.reason, "text/plain",
        absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message(), "\n"));
}

}  // namespace

void HttpServer::HandleAdmin(evhttp_request* req, bool reset) {
  const char* authorization =
      evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
  if (!AdminAuthorized(authorization, options_.admin_token)) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                      "Bearer realm=\"sluice admin\"");
    Reply(req, 401, "Unauthorized", "text/plain",
          authorization == nullptr
              ? "the admin API needs Authorization: Bearer <the token of --admin_token_file>\n"
              : "wrong token: Authorization must be Bearer <the token of --admin_token_file>\n");
    return;
  }
  // The body /json takes, checked and parsed as /json checks and parses it.
  const std::string body = BodyOf(req);
  AdminService::Request request;
  absl::Status parsed = CheckRateLimitRequestJson(body, options_.json_max_array_elements);
  if (parsed.ok()) {
    auto status = google::protobuf::util::JsonStringToMessage(
        body, &request, google::protobuf::util::JsonParseOptions());
    if (!status.ok()) {
      parsed = absl::InvalidArgumentError(status.message().as_string());
    }
  }
  if (!parsed.ok()) {
    Reply(req, 400, "Bad Request", "text/plain",
          absl::StrCat("invalid RateLimitRequest JSON: ", parsed.message(), "\n"));
    return;
  }
  // Answered on this thread, whichever thread the store answered on.
  LoopMailbox* mailbox = mailbox_.get();
  if (!reset) {
    options_.admin->Inspect(request, [req, mailbox](absl::StatusOr<InspectReport> report) {
      absl::Status status = report.status();
      std::string json = report.ok() ? InspectReportJson(*report) : std::string();
      mailbox->Post([req, status = std::move(status), json = std::move(json)] {
        if (!status.ok()) {
          ReplyError(req, status);
        } else {
          Reply(req, 200, "OK", "application/json", json);
        }
      });
    });
    return;
  }
  options_.admin->Reset(request, PeerOf(req),
                        [req, mailbox](absl::Status status, ResetReport report) {
                          // A report with no domain: the request did not resolve.
                          std::string json =
                              report.domain.empty() ? std::string() : ResetReportJson(report);
                          mailbox->Post([req, status = std::move(status),
                                         json = std::move(json)] {
                            if (json.empty()) {
                              ReplyError(req, status);
                              return;
                            }
                            const HttpStatus http = HttpStatusFromCode(status.code());
                            Reply(req, http.code, http.reason, "application/json", json);
                          });
                        });
}

}  // namespace sluice
