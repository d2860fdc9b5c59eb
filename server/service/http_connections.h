// Keeps the HTTP server's connections bounded. libevent 2.1's evhttp (Debian 12 ships 2.1.12)
// leaves them unbounded: it has no connection cap and no whole-request deadline (its timeout
// restarts on every read, so a client that sends one header line every few seconds keeps its
// connection forever), and its listener, when accept(2) fails at the file-descriptor limit,
// logs and retries in a loop (100% CPU and a flood of "Error from accept() call").
//
// How, on 2.1's API (2.2's evhttp_set_max_connections and evhttp_set_newreqcb do not exist):
// - Listen() binds an evconnlistener of its own, hands it to evhttp (evhttp_bind_listener) and
//   sets its error callback: a failed accept pauses every listener, with back-off from 50 ms to
//   1 s, instead of spinning; the log says so at most once per 10 s.
// - evhttp creates each connection's bufferevent through a callback (evhttp_set_bevcb): there a
//   connection is counted, and at the cap the connection that has waited longest for its
//   request (idle keep-alive, or still sending its request; never one being answered) is closed
//   to make room. If every connection is being answered, the newcomer gets a 503 and is closed,
//   and accepting pauses until a connection closes or can be closed.
// - Right after evhttp has set the connection up (an event activated from that callback, which
//   runs once evhttp's accept handler has returned and before the loop polls again), the
//   connection is adopted: evhttp's evhttp_connection is the bufferevent's callback argument
//   (http.c; checked through evhttp_connection_get_bufferevent), so its close callback can
//   uncount it. A timer closes it if its request (head and body) has not arrived whole within
//   the request timeout, counted from the accept or, on a keep-alive connection, from the first
//   byte of the next request (seen by a callback on the connection's input buffer). An idle
//   keep-alive connection is left to evhttp's own I/O timeout. Once its answer is handed to
//   evhttp (AnswerStarting), a connection must take it whole within the answer timeout, however
//   steadily it reads, or it is closed: a slow reader is cut off, not fed. At the cap, when no
//   connection waits for its request, one whose answer has made no way for a second is closed to
//   make room (evhttp owns such a request, so freeing it is safe; a request still being decided
//   is never closed); a newcomer arriving while every writer is younger than that is kept, one
//   over the cap with accepting paused, until the oldest writer can make room. Connections
//   accepted on one
//   pass are adopted together; accepting pauses for the rest of a pass that reaches the cap
//   with nothing adopted to close, so at most one connection is over the cap until then.
// Not thread-safe: everything runs on the HTTP thread, except construction, Listen(),
// Shutdown() and destruction, which run while that thread's loop is not running.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/common/clock.h"

struct bufferevent;
struct event;
struct event_base;
struct evbuffer;
struct evbuffer_cb_entry;
struct evbuffer_cb_info;
struct evconnlistener;
struct evhttp;
struct evhttp_connection;
struct evhttp_request;

namespace sluice {

struct HttpConnectionLimits {
  // Most connections open at once (see HttpConnectionCap for the process's share).
  size_t max_connections = 1024;
  // How long a request may take to arrive whole, head and body.
  absl::Duration request_timeout = absl::Seconds(10);
  // How long an answer may take to be written whole, once handed to evhttp.
  absl::Duration answer_timeout = absl::Seconds(30);
  // At the cap, a connection whose answer has been on its way this long may be closed to make
  // room for a newcomer.
  absl::Duration stalled_answer = absl::Seconds(1);
};

// The connection cap to serve with: `requested`, but at most half of `fd_limit` (the process's
// RLIMIT_NOFILE soft limit; 0: unlimited), so that gRPC, Redis and the config files always
// have the other half of the descriptors. At least 1.
size_t HttpConnectionCap(size_t requested, uint64_t fd_limit);

class HttpConnections {
 public:
  // Installs itself on `http` (evhttp_set_bevcb). `base`, `http` and `clock` must outlive this
  // object.
  HttpConnections(event_base* base, evhttp* http, HttpConnectionLimits limits,
                  const Clock& clock = RealClock::Get());
  // REQUIRES: Shutdown() and then evhttp_free(http) have been called.
  ~HttpConnections();
  HttpConnections(const HttpConnections&) = delete;
  HttpConnections& operator=(const HttpConnections&) = delete;

  // Binds `address` ("host:port", "[v6]:port") for `http`; returns the port bound. `flag` names
  // the address in errors ("--debug_address=...: cannot listen: Address already in use").
  absl::StatusOr<int> Listen(const std::string& address, absl::string_view flag);
  // Call on the HTTP thread before its loop runs: the listeners' error callback, which libevent
  // calls with evhttp's argument rather than ours, finds this object through the thread.
  void BindToThisThread();
  // Called by the request handler as a request arrives whole: its connection is being answered,
  // so the request timeout no longer applies and it cannot be evicted, until the answer has
  // been written.
  void RequestArrived(evhttp_request* req);
  // Called by whatever sends an answer (http_reply.h), right before evhttp_send_reply: the
  // request's connection is then writing its answer, which must be done within the answer
  // timeout. Finds the HttpConnections bound to this thread (BindToThisThread); does nothing if
  // there is none or the request's connection is not one of its own.
  static void AnswerStarting(evhttp_request* req);
  // Appends the connection metrics (Prometheus text): open, the cap, closed by reason, accept
  // errors.
  void AppendMetrics(std::string* out) const;
  // Stops touching the listeners, which evhttp_free is about to free. REQUIRES: the loop has
  // stopped.
  void Shutdown();

  size_t open() const { return pending_.size() + adopted_.size(); }

 private:
  struct Connection;
  // kReceiving: its request is arriving (timer: the request timeout); kAnswering: the request
  // arrived and is being decided, the request is ours; kWriting: the answer is with evhttp
  // (timer: the answer timeout); kIdle: a keep-alive connection between requests.
  enum class Phase { kReceiving, kAnswering, kWriting, kIdle };

  static bufferevent* NewBufferevent(event_base* base, void* self);
  static void AdoptPending(int fd, short what, void* self);
  static void OnClose(evhttp_connection* evcon, void* connection);
  static void OnInput(evbuffer* buffer, const evbuffer_cb_info* info, void* connection);
  static void OnTimeout(int fd, short what, void* connection);
  static void OnAnswered(evhttp_request* req, void* connection);
  static void OnAcceptError(evconnlistener* listener, void* unused);
  static void OnBackoffOver(int fd, short what, void* self);
  static void OnResume(int fd, short what, void* self);

  bufferevent* Accepted(event_base* base);
  void Adopt(std::unique_ptr<Connection> connection);
  // Closes the connection that has waited longest for its request, or else one whose answer
  // has been on its way for the stalled_answer time; false if there is none.
  bool EvictOne();
  bool EvictStalledWriter();
  // How long until the connection writing longest has been at it for the stalled_answer time
  // (0: it has); -1 if none is writing.
  int64_t UntilStalledUs() const;
  // Answers 503 on the fresh connection and closes it; pauses accepting until one can make
  // room.
  void Refuse(Connection& connection);
  void StartReceiving(Connection& connection);
  void Writing(Connection& connection);
  void Forget(Connection& connection);
  void AcceptFailed(int error);
  // Enables or disables the listeners to match the pause reasons.
  void UpdateAccepting();

  event_base* const base_;
  evhttp* const http_;
  const HttpConnectionLimits limits_;
  const Clock& clock_;
  std::vector<evconnlistener*> listeners_;  // owned by evhttp
  // Connections evhttp is setting up, adopted by adopt_ on this loop pass.
  std::vector<std::unique_ptr<Connection>> pending_;
  absl::flat_hash_map<evhttp_connection*, std::unique_ptr<Connection>> adopted_;
  // Adopted connections not being answered, longest waiting first: eviction order.
  std::list<Connection*> waiting_;
  // Connections writing their answer, the one that started first first: eviction order when
  // none is waiting.
  std::list<Connection*> writing_;
  event* adopt_ = nullptr;
  event* backoff_timer_ = nullptr;
  event* resume_timer_ = nullptr;  // accepting again once a writer can be evicted
  absl::Duration backoff_ = absl::ZeroDuration();  // zero after an accept succeeds
  bool backoff_pending_ = false;
  bool paused_at_cap_ = false;        // until a connection closes or can be evicted
  bool paused_for_adoption_ = false;  // until this loop pass's connections are adopted
  bool accepting_ = true;
  bool shut_down_ = false;
  uint64_t timed_out_ = 0;
  uint64_t answer_timed_out_ = 0;
  uint64_t evicted_ = 0;
  uint64_t refused_ = 0;
  uint64_t accept_errors_ = 0;
};

}  // namespace sluice
