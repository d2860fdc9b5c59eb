// The listener of envoyproxy/ratelimit's Prometheus surface (--prometheus_address, upstream's
// PROMETHEUS_ADDR): one path (--prometheus_path, default /metrics) answering GET and HEAD with
// the page `render` makes, in the Prometheus text format; any other path is 404, another method
// 405. A listener of its own, on its own thread (libevent evhttp), so that a scrape never holds
// up /json on the HTTP port; the page is rendered on a thread of its own at most once a second
// and shared by the scrapes that ask meanwhile (scrape_cache.h). Bounded like the HTTP server's
// listeners (http_connections.h): at most kMaxConnections connections, a request must arrive
// whole within 10 s and its answer be read within the answer timeout (at the cap, a client that has
// not read its answer for a second makes room), small request heads and no body.
//
// Start and Stop are called from one thread; `render` runs on the renderer's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/service/http_connections.h"
#include "server/service/loop_mailbox.h"
#include "server/service/scrape_cache.h"

struct event_base;
struct evhttp;
struct evhttp_request;

namespace sluice {

class PrometheusListener {
 public:
  static constexpr size_t kMaxConnections = 16;

  // `path` starts with '/'. `render` makes the page of one scrape. An answer not read whole
  // within `answer_timeout` closes its connection.
  PrometheusListener(std::string path, std::function<std::string()> render,
                     absl::Duration answer_timeout = absl::Seconds(30));
  ~PrometheusListener();
  PrometheusListener(const PrometheusListener&) = delete;
  PrometheusListener& operator=(const PrometheusListener&) = delete;

  // Binds `address` (HOST:PORT) and starts the thread. Errors name --prometheus_address.
  // REQUIRES: once.
  absl::Status Start(const std::string& address);
  // Stops the thread; scrapes in flight are dropped. Idempotent.
  void Stop();
  // The port bound (useful with port 0); 0 before Start.
  int port() const { return port_; }

 private:
  static void Dispatch(evhttp_request* req, void* self);
  void Release();

  const std::string path_;
  const absl::Duration answer_timeout_;
  std::unique_ptr<ScrapeCache> pages_;  // until Stop
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  std::unique_ptr<HttpConnections> connections_;
  std::unique_ptr<LoopMailbox> mailbox_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace sluice
