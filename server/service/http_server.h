// The HTTP side of the server, on libevent's evhttp, one thread:
//   POST /json      the ShouldRateLimit request as JSON (proto3 JSON mapping); answers the
//                   response as JSON, 200 OK or 429 when over limit, 400 on a bad request
//   GET  /healthz   200 "OK" while serving, 503 once draining (also /healthcheck)
//   GET  /readyz    200 while the backend can decide (e.g. Redis is connected), else 503
//   GET  /config    the rules in force, one per line
//   GET  /metrics   Prometheus text format
// Start and Stop are called from one thread; the handlers run on the HTTP thread. Decisions
// that complete on another thread are marshalled back to the HTTP thread before replying.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/config/config_store.h"
#include "server/service/metrics.h"
#include "server/service/rate_limiter.h"

struct event_base;
struct evhttp;
struct evhttp_request;

namespace sluice {

class HttpServer {
 public:
  // Collaborators must outlive the server.
  HttpServer(RateLimiter& limiter, const ConfigStore& config, const Backend& backend,
             Metrics& metrics);
  ~HttpServer();

  // Binds `address` ("host:port") and starts the HTTP thread.
  absl::Status Start(const std::string& address);
  // Answers /healthz with 503 from now on, so load balancers stop sending new work.
  void SetDraining() { draining_.store(true); }
  // Stops the thread; requests in flight are dropped. Idempotent.
  void Stop();
  // The port actually bound (useful with port 0).
  int port() const { return port_; }

 private:
  static void Dispatch(evhttp_request* req, void* self);
  void HandleJson(evhttp_request* req);

  RateLimiter& limiter_;
  const ConfigStore& config_;
  const Backend& backend_;
  Metrics& metrics_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  std::thread thread_;
  std::atomic<bool> draining_{false};
  int port_ = 0;
};

}  // namespace sluice
