// The HTTP side of the server, on libevent's evhttp, one thread:
//   POST /json      the ShouldRateLimit request as JSON (proto3 JSON mapping); answers the
//                   response as JSON, 200 OK or 429 when over limit, 400 on a bad request
//   GET  /healthz   200 "OK" while serving, 503 once draining
//   GET  /healthcheck  envoyproxy/ratelimit's: 200 "OK" while serving, 500 once draining, and
//                   500 while no domain is loaded if HttpServerOptions::healthy_requires_config
//   GET  /readyz    200 while the backend can decide (e.g. Redis is connected), else 503
//   GET  /config    the rules in force, one per line (also /rlconfig, upstream's name)
//   GET  /metrics   Prometheus text format
// Start and Stop are called from one thread; the handlers run on the HTTP thread. Decisions
// that complete on another thread are marshalled back to the HTTP thread before replying.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/config/config_store.h"
#include "server/service/metrics.h"
#include "server/service/rate_limiter.h"

struct event_base;
struct evhttp;
struct evhttp_request;

namespace sluice {

struct HttpServerOptions {
  // envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: /healthcheck fails while
  // the configuration in force has no domain.
  bool healthy_requires_config = false;
  // A connection that sends or reads nothing for this long is closed: a slow or stalled client
  // cannot hold one open forever.
  int io_timeout_seconds = 10;
  // Largest request head (request line and headers) and body accepted; larger gets an error
  // answer and the connection closed.
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 4 << 20;
};

class HttpServer {
 public:
  // Collaborators must outlive the server.
  HttpServer(RateLimiter& limiter, const ConfigStore& config, const Backend& backend,
             Metrics& metrics, HttpServerOptions options = {});
  ~HttpServer();

  // Binds `address` ("host:port") and, if not empty, `debug_address` (a second listener with
  // the same endpoints, where envoyproxy/ratelimit's deployments look for /rlconfig and stats),
  // then starts the HTTP thread.
  absl::Status Start(const std::string& address, const std::string& debug_address = "");
  // Answers /healthz with 503 from now on, so load balancers stop sending new work.
  void SetDraining() { draining_.store(true); }
  // Stops the thread; requests in flight are dropped. Idempotent.
  void Stop();
  // The ports actually bound (useful with port 0); debug_port() is 0 without a debug address.
  int port() const { return port_; }
  int debug_port() const { return debug_port_; }

 private:
  static void Dispatch(evhttp_request* req, void* self);
  void HandleJson(evhttp_request* req);
  // Binds one more socket to http_; returns its port.
  absl::StatusOr<int> Bind(const std::string& address);

  RateLimiter& limiter_;
  const ConfigStore& config_;
  const Backend& backend_;
  Metrics& metrics_;
  const HttpServerOptions options_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  std::thread thread_;
  std::atomic<bool> draining_{false};
  int port_ = 0;
  int debug_port_ = 0;
};

}  // namespace sluice
