#include "server/service/http_connections.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

// The HttpConnections whose loop runs on this thread (see BindToThisThread).
thread_local HttpConnections* this_thread_connections = nullptr;

}  // namespace

size_t HttpConnectionCap(size_t requested, uint64_t fd_limit) {
  size_t cap = requested;
  if (fd_limit != 0) {
    cap = static_cast<size_t>(std::min<uint64_t>(cap, fd_limit / 2));
  }
  return std::max<size_t>(cap, 1);
}

struct HttpConnections::Connection {
  HttpConnections* owner;
  bufferevent* bev;  // one reference is ours until Forget
  evhttp_connection* evcon = nullptr;  // set on adoption
  event* request_timer = nullptr;
  evbuffer_cb_entry* input_watch = nullptr;
  Phase phase = Phase::kReceiving;
  // In waiting_ while kReceiving or kIdle, in writing_ while kWriting.
  std::list<Connection*>::iterator waiting;
  int64_t writing_since_us = 0;  // while kWriting
};

HttpConnections::HttpConnections(event_base* base, evhttp* http, HttpConnectionLimits limits,
                                 const Clock& clock)
    : base_(base), http_(http), limits_(limits), clock_(clock) {
  adopt_ = event_new(base_, -1, 0, &HttpConnections::AdoptPending, this);
  backoff_timer_ = evtimer_new(base_, &HttpConnections::OnBackoffOver, this);
  resume_timer_ = evtimer_new(base_, &HttpConnections::OnResume, this);
  evhttp_set_bevcb(http, &HttpConnections::NewBufferevent, this);
}

HttpConnections::~HttpConnections() {
  // evhttp_free has closed every adopted connection (their close callbacks forgot them); what
  // is left was accepted but never adopted, and evhttp has let go of it.
  for (std::unique_ptr<Connection>& connection : pending_) {
    bufferevent_decref(connection->bev);
  }
  pending_.clear();
  while (!adopted_.empty()) {
    Forget(*adopted_.begin()->second);
  }
  event_free(adopt_);
  event_free(backoff_timer_);
  event_free(resume_timer_);
}

void HttpConnections::Shutdown() { shut_down_ = true; }

void HttpConnections::BindToThisThread() { this_thread_connections = this; }

absl::StatusOr<int> HttpConnections::Listen(const std::string& address, absl::string_view flag) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  evutil_addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = EVUTIL_AI_PASSIVE | EVUTIL_AI_ADDRCONFIG;
  evutil_addrinfo* resolved = nullptr;
  const std::string port_text = std::to_string(port);
  if (int error = evutil_getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(),
                                     &hints, &resolved);
      error != 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", address, ": cannot resolve '",
                                                   host, "': ", evutil_gai_strerror(error)));
  }
  evconnlistener* listener = evconnlistener_new_bind(
      base_, nullptr, nullptr, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
      -1, resolved->ai_addr, static_cast<int>(resolved->ai_addrlen));
  const int bind_error = errno;
  evutil_freeaddrinfo(resolved);
  if (listener == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(flag, "=", address, ": cannot listen: ", std::strerror(bind_error)));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(evconnlistener_get_fd(listener), reinterpret_cast<sockaddr*>(&bound), &length);
  // evhttp takes the listener (evhttp_free frees it) and makes the accept callback its own,
  // with itself as the argument, which the error callback then receives too.
  if (evhttp_bind_listener(http_, listener) == nullptr) {
    evconnlistener_free(listener);
    return absl::ResourceExhaustedError(absl::StrCat(flag, "=", address, ": out of memory"));
  }
  evconnlistener_set_error_cb(listener, &HttpConnections::OnAcceptError);
  listeners_.push_back(listener);
  return bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

bufferevent* HttpConnections::NewBufferevent(event_base* base, void* self) {
  return static_cast<HttpConnections*>(self)->Accepted(base);
}

bufferevent* HttpConnections::Accepted(event_base* base) {
  backoff_ = absl::ZeroDuration();
  if (open() >= limits_.max_connections && !EvictOne()) {
    // Nothing adopted can make room (the connections accepted on this pass are not adopted
    // yet): accept no more until they are, so at most this one is over the cap meanwhile.
    paused_for_adoption_ = true;
    UpdateAccepting();
  }
  // As evhttp makes its own (no options: evhttp closes the socket itself), plus a reference of
  // ours, so that the bufferevent outlives evhttp's connection until we have let go of it.
  bufferevent* bev = bufferevent_socket_new(base, -1, 0);
  if (bev == nullptr) {
    return nullptr;  // evhttp tries to make one itself; that connection goes uncounted
  }
  bufferevent_incref(bev);
  auto connection = std::make_unique<Connection>();
  connection->owner = this;
  connection->bev = bev;
  pending_.push_back(std::move(connection));
  // Runs once evhttp's accept handler returns, before the loop next polls for I/O: nothing can
  // have happened to the connection meanwhile but a failure of evhttp's own set-up.
  event_active(adopt_, EV_TIMEOUT, 0);
  return bev;
}

void HttpConnections::AdoptPending(int /*fd*/, short /*what*/, void* self) {
  auto* connections = static_cast<HttpConnections*>(self);
  std::vector<std::unique_ptr<Connection>> pending = std::move(connections->pending_);
  connections->pending_.clear();
  for (std::unique_ptr<Connection>& connection : pending) {
    connections->Adopt(std::move(connection));
  }
  if (connections->paused_for_adoption_) {
    connections->paused_for_adoption_ = false;
    connections->UpdateAccepting();
  }
}

void HttpConnections::Adopt(std::unique_ptr<Connection> owned) {
  bufferevent_event_cb event_callback = nullptr;
  void* argument = nullptr;
  bufferevent_getcb(owned->bev, nullptr, nullptr, &event_callback, &argument);
  auto* evcon = static_cast<evhttp_connection*>(argument);
  // evhttp clears the callbacks of a bufferevent it frees: then it gave the connection up while
  // setting it up (out of memory, say), and only our reference is left.
  if (event_callback == nullptr || evcon == nullptr ||
      evhttp_connection_get_bufferevent(evcon) != owned->bev) {
    bufferevent_decref(owned->bev);
    return;
  }
  Connection& connection = *owned;
  connection.evcon = evcon;
  adopted_[evcon] = std::move(owned);
  evhttp_connection_set_closecb(evcon, &HttpConnections::OnClose, &connection);
  connection.input_watch =
      evbuffer_add_cb(bufferevent_get_input(connection.bev), &HttpConnections::OnInput,
                      &connection);
  connection.request_timer = evtimer_new(base_, &HttpConnections::OnTimeout, &connection);
  connection.waiting = waiting_.insert(waiting_.end(), &connection);
  if (open() > limits_.max_connections && waiting_.front() != &connection) {
    EvictOne();  // one accepted on this pass was over the cap; an older one makes room
  } else if (open() > limits_.max_connections && !EvictStalledWriter()) {
    if (const int64_t wait_us = UntilStalledUs(); wait_us >= 0) {
      // A connection writing its answer can be evicted once it has been at it a while: this
      // one is kept, one over the cap, until then (OnResume makes room), and accepting pauses
      // meanwhile, so that a newcomer is not refused while a client that does not read holds
      // its place.
      paused_at_cap_ = true;
      UpdateAccepting();
      const timeval wait = absl::ToTimeval(absl::Microseconds(wait_us));
      evtimer_add(resume_timer_, &wait);
    } else {
      // Every other connection is being decided: this one is refused, and accepting pauses
      // until one can make room (the kernel's backlog holds newcomers meanwhile).
      Refuse(connection);
      return;
    }
  }
  StartReceiving(connection);
}

void HttpConnections::Refuse(Connection& connection) {
  ++refused_;
  paused_at_cap_ = true;
  UpdateAccepting();
  // Refused only while no connection writes (all are being decided): one that starts writing
  // arms the resume timer (Writing).
  SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
      << "HTTP: " << open() - 1 << " connections open, every one being answered, at "
      << "--http_max_connections=" << limits_.max_connections
      << ": refusing new ones with 503 until one can make room";
  const std::string body = absl::StrCat("too many HTTP connections (--http_max_connections=",
                                        limits_.max_connections, "); try again\n");
  const std::string answer = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n", body);
  const int fd = bufferevent_getfd(connection.bev);
  // Whatever the client already sent is read and dropped: closing a socket with unread input
  // resets the connection, and the client might lose the answer.
  char sink[4096];
  for (int reads = 0; reads < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++reads) {
  }
  // A fresh socket's send buffer is empty: this does not block, and a short write is harmless,
  // as the connection is closed either way.
  (void)send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  evhttp_connection_free(connection.evcon);  // its close callback forgets it
}

void HttpConnections::StartReceiving(Connection& connection) {
  connection.phase = Phase::kReceiving;
  if (connection.request_timer != nullptr) {
    const timeval timeout = absl::ToTimeval(limits_.request_timeout);
    evtimer_add(connection.request_timer, &timeout);
  }
}

bool HttpConnections::EvictOne() {
  if (waiting_.empty()) {
    return EvictStalledWriter();
  }
  ++evicted_;
  SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
      << "HTTP: " << open() << " connections open, at --http_max_connections="
      << limits_.max_connections << ": closing the one waiting longest for its request";
  evhttp_connection_free(waiting_.front()->evcon);  // its close callback forgets it
  return true;
}

int64_t HttpConnections::UntilStalledUs() const {
  if (writing_.empty()) {
    return -1;
  }
  const int64_t stalled_at = writing_.front()->writing_since_us +
                             absl::ToInt64Microseconds(limits_.stalled_answer);
  return std::max<int64_t>(0, stalled_at - clock_.MonotonicMicros());
}

bool HttpConnections::EvictStalledWriter() {
  if (UntilStalledUs() != 0) {
    return false;
  }
  // Its answer is evhttp's to free with the connection; a client that has not read it in a
  // while, at the cap, is not entitled to its place.
  ++evicted_;
  SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
      << "HTTP: " << open() << " connections open, at --http_max_connections="
      << limits_.max_connections << ": closing the one whose answer has waited longest to be "
      << "read";
  evhttp_connection_free(writing_.front()->evcon);  // its close callback forgets it
  return true;
}

void HttpConnections::AnswerStarting(evhttp_request* req) {
  HttpConnections* self = this_thread_connections;
  if (self == nullptr) {
    return;
  }
  auto it = self->adopted_.find(evhttp_request_get_connection(req));
  if (it != self->adopted_.end() && it->second->phase == Phase::kAnswering) {
    self->Writing(*it->second);
  }
}

void HttpConnections::Writing(Connection& connection) {
  connection.phase = Phase::kWriting;
  connection.writing_since_us = clock_.MonotonicMicros();
  connection.waiting = writing_.insert(writing_.end(), &connection);
  if (connection.request_timer != nullptr) {
    const timeval timeout = absl::ToTimeval(limits_.answer_timeout);
    evtimer_add(connection.request_timer, &timeout);
  }
  // Paused at the cap while every connection was being decided: this one can make room once
  // it has been writing a while.
  if (paused_at_cap_ && evtimer_pending(resume_timer_, nullptr) == 0) {
    const timeval wait = absl::ToTimeval(limits_.stalled_answer);
    evtimer_add(resume_timer_, &wait);
  }
}

void HttpConnections::RequestArrived(evhttp_request* req) {
  auto it = adopted_.find(evhttp_request_get_connection(req));
  if (it == adopted_.end() || it->second->phase == Phase::kAnswering ||
      it->second->phase == Phase::kWriting) {
    return;
  }
  Connection& connection = *it->second;
  connection.phase = Phase::kAnswering;
  waiting_.erase(connection.waiting);
  if (connection.request_timer != nullptr) {
    evtimer_del(connection.request_timer);
  }
  // Called once the answer has been written, before evhttp reads the next request.
  evhttp_request_set_on_complete_cb(req, &HttpConnections::OnAnswered, &connection);
}

void HttpConnections::OnAnswered(evhttp_request* /*req*/, void* argument) {
  Connection& connection = *static_cast<Connection*>(argument);
  HttpConnections& self = *connection.owner;
  if (connection.phase == Phase::kWriting) {
    self.writing_.erase(connection.waiting);
    if (connection.request_timer != nullptr) {
      evtimer_del(connection.request_timer);
    }
  }
  connection.phase = Phase::kIdle;
  connection.waiting = self.waiting_.insert(self.waiting_.end(), &connection);
  // Accepting paused at the cap because nothing could be evicted; now this connection can be.
  if (self.paused_at_cap_) {
    self.paused_at_cap_ = false;
    self.UpdateAccepting();
  }
  // Pipelined bytes already read belong to the next request, whose clock starts now.
  if (evbuffer_get_length(bufferevent_get_input(connection.bev)) > 0) {
    self.StartReceiving(connection);
  }
}

void HttpConnections::OnInput(evbuffer* /*buffer*/, const evbuffer_cb_info* info,
                              void* argument) {
  Connection& connection = *static_cast<Connection*>(argument);
  if (info->n_added > 0 && connection.phase == Phase::kIdle) {
    connection.owner->StartReceiving(connection);
  }
}

void HttpConnections::OnTimeout(int /*fd*/, short /*what*/, void* argument) {
  Connection& connection = *static_cast<Connection*>(argument);
  HttpConnections& self = *connection.owner;
  if (connection.phase == Phase::kWriting) {
    ++self.answer_timed_out_;
    SLUICE_LOG_EVERY_SECONDS(INFO, 10)
        << "HTTP: closed a connection that did not read its answer whole within "
        << absl::FormatDuration(self.limits_.answer_timeout);
    // evhttp owns the request once the answer is handed over: freeing the connection frees it.
    evhttp_connection_free(connection.evcon);
    return;
  }
  ++self.timed_out_;
  SLUICE_LOG_EVERY_SECONDS(INFO, 10)
      << "HTTP: closed a connection whose request did not arrive whole within "
      << "--http_request_timeout=" << absl::FormatDuration(self.limits_.request_timeout);
  // Not being answered (the timer stops when the request arrives), so evhttp owns the request:
  // freeing the connection frees it too. The close callback forgets the connection.
  evhttp_connection_free(connection.evcon);
}

void HttpConnections::OnClose(evhttp_connection* /*evcon*/, void* argument) {
  Connection& connection = *static_cast<Connection*>(argument);
  connection.owner->Forget(connection);
}

void HttpConnections::Forget(Connection& connection) {
  if (connection.phase == Phase::kWriting) {
    writing_.erase(connection.waiting);
  } else if (connection.phase != Phase::kAnswering) {
    waiting_.erase(connection.waiting);
  }
  if (connection.request_timer != nullptr) {
    event_free(connection.request_timer);
  }
  if (connection.input_watch != nullptr) {
    evbuffer_remove_cb_entry(bufferevent_get_input(connection.bev), connection.input_watch);
  }
  // evhttp still holds its own reference and frees the bufferevent right after this callback.
  bufferevent_decref(connection.bev);
  adopted_.erase(connection.evcon);  // destroys `connection`
  if (paused_at_cap_ && open() < limits_.max_connections) {
    paused_at_cap_ = false;
    UpdateAccepting();
  }
}

void HttpConnections::OnAcceptError(evconnlistener* /*listener*/, void* /*evhttp*/) {
  const int error = errno;
  if (this_thread_connections != nullptr) {
    this_thread_connections->AcceptFailed(error);
  }
}

void HttpConnections::AcceptFailed(int error) {
  ++accept_errors_;
  backoff_ = backoff_ == absl::ZeroDuration() ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
  SLUICE_LOG_EVERY_SECONDS(WARNING, 10)
      << "HTTP: accept failed: " << std::strerror(error) << " (" << open()
      << " HTTP connections open, at most " << limits_.max_connections
      << "; see ulimit -n); not accepting for " << absl::FormatDuration(backoff_);
  backoff_pending_ = true;
  UpdateAccepting();
  const timeval wait = absl::ToTimeval(backoff_);
  evtimer_add(backoff_timer_, &wait);
}

void HttpConnections::OnResume(int /*fd*/, short /*what*/, void* self) {
  auto* connections = static_cast<HttpConnections*>(self);
  // One kept over the cap waits for a place: the connection writing longest gives it up now.
  if (connections->open() > connections->limits_.max_connections && !connections->EvictOne()) {
    const int64_t wait_us = connections->UntilStalledUs();
    if (wait_us > 0) {
      const timeval wait = absl::ToTimeval(absl::Microseconds(wait_us));
      evtimer_add(connections->resume_timer_, &wait);
      return;
    }
  }
  if (connections->paused_at_cap_) {
    connections->paused_at_cap_ = false;
    connections->UpdateAccepting();
  }
}

void HttpConnections::OnBackoffOver(int /*fd*/, short /*what*/, void* self) {
  auto* connections = static_cast<HttpConnections*>(self);
  connections->backoff_pending_ = false;
  connections->UpdateAccepting();
}

void HttpConnections::UpdateAccepting() {
  if (shut_down_) {
    return;
  }
  const bool accept = !paused_at_cap_ && !paused_for_adoption_ && !backoff_pending_;
  if (accept == accepting_) {
    return;
  }
  accepting_ = accept;
  for (evconnlistener* listener : listeners_) {
    if (accept) {
      evconnlistener_enable(listener);
    } else {
      evconnlistener_disable(listener);
    }
  }
}

void HttpConnections::AppendMetrics(std::string* out) const {
  absl::StrAppend(
      out,
      "# HELP sluice_http_connections HTTP connections open.\n"
      "# TYPE sluice_http_connections gauge\n"
      "sluice_http_connections ", open(), "\n",
      "# HELP sluice_http_connections_max The HTTP connection cap (--http_max_connections, at "
      "most half of the file-descriptor limit).\n"
      "# TYPE sluice_http_connections_max gauge\n"
      "sluice_http_connections_max ", limits_.max_connections, "\n",
      "# HELP sluice_http_connections_closed_total HTTP connections Sluice closed itself: "
      "request_timeout (request not whole within --http_request_timeout), answer_timeout "
      "(answer not read whole within --http_answer_timeout), evicted (at the cap: waiting "
      "longest, or not reading its answer), refused (over the cap with every connection being "
      "answered).\n"
      "# TYPE sluice_http_connections_closed_total counter\n");
  absl::StrAppend(out,
                  "sluice_http_connections_closed_total{reason=\"request_timeout\"} ",
                  timed_out_, "\n",
                  "sluice_http_connections_closed_total{reason=\"answer_timeout\"} ",
                  answer_timed_out_, "\n",
                  "sluice_http_connections_closed_total{reason=\"evicted\"} ", evicted_, "\n",
                  "sluice_http_connections_closed_total{reason=\"refused\"} ", refused_, "\n");
  absl::StrAppend(out,
                  "# HELP sluice_http_accept_errors_total Failed accepts on the HTTP listeners "
                  "(e.g. at the file-descriptor limit); each pauses accepting, with back-off.\n"
                  "# TYPE sluice_http_accept_errors_total counter\n"
                  "sluice_http_accept_errors_total ",
                  accept_errors_, "\n");
}

}  // namespace sluice
