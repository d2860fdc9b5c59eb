// The HTTP side of the server, on libevent's evhttp, one thread:
//   POST /json      the ShouldRateLimit request as JSON (proto3 JSON mapping); answers the
//                   response as JSON, 200 OK or 429 when over limit; an error as gRPC's code
//                   maps to HTTP (400 for a bad request, 503 while no config is loaded, ...:
//                   see http_status.h)
//   GET  /healthz   200 "OK" while serving, 503 once draining
//   GET  /healthcheck  envoyproxy/ratelimit's: 200 "OK" while serving, 500 once draining, 500
//                   while waiting for the backend's first answer (SetWaitingForBackend), and
//                   500 while no domain is loaded if HttpServerOptions::healthy_requires_config
//   GET  /readyz    200 while calls can be decided: a config is loaded and the backend can
//                   decide (e.g. Redis is connected); else 503 saying why
//   GET  /config    the rules in force, one per line (also /rlconfig, upstream's name),
//                   rendered off the HTTP thread once per config (config_dump_cache.h)
//   GET  /metrics   Prometheus text format, rendered off the HTTP thread at most once a second
//                   and shared by the scrapes that ask meanwhile (scrape_cache.h)
//   GET  /          the endpoints, one "path: what" line each, sorted (as envoyproxy/ratelimit's
//                   debug port lists its own)
//   POST /admin/inspect, POST /admin/reset
//                   the admin API (admin_service.h), with the /json request's body: a domain and
//                   its descriptors' state, or its reset; 404 naming --admin_api while it is
//                   off, 401 without the bearer token (admin_auth.h), 400 for a bad body as
//                   /json answers it
// The GET endpoints answer HEAD too (headers only); another method on a known path is 405 with
// an Allow header, a method libevent does not know is 501, an unknown path 404.
// Connections are bounded by count, a request by the time it may take to arrive, and an answer
// by the time it may take to be read (http_connections.h).
// Start and Stop are called from one thread; the handlers run on the HTTP thread. Decisions,
// /config and /metrics pages that complete on another thread are marshalled back to the HTTP
// thread before replying.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/mutex.h"
#include "server/config/config_store.h"
#include "server/quota/quota_server.h"
#include "server/service/admin_service.h"
#include "server/service/config_dump_cache.h"
#include "server/service/http_connections.h"
#include "server/service/loop_mailbox.h"
#include "server/service/metrics.h"
#include "server/service/rate_limiter.h"
#include "server/service/reset_follower.h"
#include "server/service/scrape_cache.h"

struct event;
struct event_base;
struct evhttp;
struct evhttp_request;

namespace sluice {

struct HttpServerOptions {
  // envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: /healthcheck fails while
  // the configuration in force has no domain.
  bool healthy_requires_config = false;
  // A connection that sends or reads nothing for this long is closed: an idle keep-alive
  // connection, or a client that stopped reading its answer.
  int io_timeout_seconds = 10;
  // A request whose head and body have not all arrived this long after its connection was
  // accepted (on a keep-alive connection: after the request's first byte) is dropped with its
  // connection, however steadily it trickles in.
  absl::Duration request_timeout = absl::Seconds(10);
  // An answer not read whole this long after it was handed over closes its connection.
  absl::Duration answer_timeout = absl::Seconds(30);
  // Most connections open at once; at the cap, the one waiting longest for its request is
  // closed to make room. The caller keeps it within the descriptor limit (HttpConnectionCap).
  size_t max_connections = 1024;
  // Largest request head (request line and headers) and body accepted; larger gets an error
  // answer and the connection closed.
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 4 << 20;
  // Most elements of any array in a /json body, checked before protobuf parses it
  // (json_request_check.h): the larger of the limiter's max_descriptors and max_entries, as
  // descriptors and their entries are a RateLimitRequest's only arrays.
  size_t json_max_array_elements = 64;
  // Largest /config page; a longer one is cut at a line boundary, its last line saying so.
  size_t config_dump_max_bytes = 4 << 20;
  // A /metrics page younger than this is served again rather than rendered anew.
  absl::Duration metrics_max_age = absl::Seconds(1);
  // Optional (must outlive the server): each /json call sampled gets a server span "POST /json",
  // a child of the caller's when its headers carry a trace context.
  Tracer* tracer = nullptr;
  // Appends more metrics to /metrics (the quota service's); may be null.
  const quota::QuotaServer* quota = nullptr;
  // The admin API (--admin_api), served on every listener when not null (and its metrics on
  // /metrics); null: /admin/* answers 404. Must outlive the server.
  AdminService* admin = nullptr;
  // The bearer token every admin call must present (--admin_token_file); empty: none.
  std::string admin_token;
  // The reset log's follower, whose metrics /metrics serves; may be null.
  const ResetFollower* reset_follower = nullptr;
};

class HttpServer {
 public:
  // Collaborators must outlive the server.
  HttpServer(RateLimiter& limiter, const ConfigStore& config, const Backend& backend,
             Metrics& metrics, HttpServerOptions options = {});
  ~HttpServer();

  // Binds `address` ("host:port") and, if not empty, `debug_address` (a second listener with
  // the same endpoints, where envoyproxy/ratelimit's deployments look for /rlconfig and stats),
  // then starts the HTTP thread. Errors name the flag of the address at fault (--http_address,
  // --debug_address). A debug address that cannot be listened on is an error only if
  // `debug_required`; otherwise it is logged (a warning) and debug_port() stays 0.
  absl::Status Start(const std::string& address, const std::string& debug_address = "",
                     bool debug_required = true);
  // Answers /healthz with 503 from now on, so load balancers stop sending new work.
  void SetDraining() { draining_.store(true); }
  // While true, /healthcheck answers 500: the backend has not answered yet at start
  // (--wait_for_backend). Any thread.
  void SetWaitingForBackend(bool waiting) { waiting_for_backend_.store(waiting); }
  // Stops the thread; requests in flight are dropped. Idempotent.
  void Stop();
  // The ports actually bound (useful with port 0); debug_port() is 0 without a debug address.
  int port() const { return port_; }
  int debug_port() const { return debug_port_; }
  // How many times the /config page has been rendered (once per config asked for).
  int64_t config_renders() const { return config_pages_ ? config_pages_->renders() : 0; }
  // How many times the /metrics page has been rendered.
  int64_t metrics_renders() const { return metrics_pages_ ? metrics_pages_->renders() : 0; }

 private:
  static void Dispatch(evhttp_request* req, void* self);
  void HandleJson(evhttp_request* req);
  void HandleConfig(evhttp_request* req);
  void HandleMetrics(evhttp_request* req);
  // The /metrics page but for the connection metrics; runs on the renderer's thread.
  std::string RenderMetrics() const;
  void HandleReadyz(evhttp_request* req);
  // POST /admin/inspect (reset false) and /admin/reset, once --admin_api is known to be on.
  void HandleAdmin(evhttp_request* req, bool reset);
  // Frees what Start made. REQUIRES: the HTTP thread is not running.
  void Release();

  RateLimiter& limiter_;
  const ConfigStore& config_;
  const Backend& backend_;
  Metrics& metrics_;
  const HttpServerOptions options_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  std::unique_ptr<HttpConnections> connections_;
  std::unique_ptr<ConfigDumpCache> config_pages_;
  std::unique_ptr<ScrapeCache> metrics_pages_;
  // Pages made on the caches' threads reach the HTTP thread through it.
  std::unique_ptr<LoopMailbox> mailbox_;
  std::thread thread_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> waiting_for_backend_{false};
  int port_ = 0;
  int debug_port_ = 0;
};

}  // namespace sluice
