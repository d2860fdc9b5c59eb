#include "server/stats/statsd_connection.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/redis/address.h"

namespace sluice {
namespace {

std::string Errno(int error) { return std::strerror(error); }

// Waits until `fd` is ready for `events` or `deadline` passes; false on timeout or error.
bool WaitReady(int fd, short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return false;
    }
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready > 0) {
      return true;
    }
    if (ready < 0 && errno != EINTR) {
      return false;
    }
  }
}

}  // namespace

StatsdConnection::StatsdConnection(const std::string& address, StatsdProtocol protocol)
    : protocol_(protocol) {
  int port = 0;
  if (SplitHostPort(address, &host_, &port).ok()) {
    port_ = absl::StrCat(port);
  } else {
    host_ = address;  // port_ stays empty: Send refuses it
  }
}

StatsdConnection::~StatsdConnection() { Close(); }

void StatsdConnection::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

absl::Status StatsdConnection::Connect() {
  if (port_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("statsd address '", host_, "' is not HOST:PORT or [IPv6]:PORT"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = protocol_ == StatsdProtocol::kUdp ? SOCK_DGRAM : SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host_.c_str(), port_.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host_, ": ", ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  std::vector<const addrinfo*> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    addresses.push_back(a);
  }
  std::stable_partition(addresses.begin(), addresses.end(),
                        [](const addrinfo* a) { return a->ai_family == AF_INET; });
  const absl::Time deadline = absl::Now() + kConnectTimeout;
  std::string last_error = "no address";
  for (const addrinfo* a : addresses) {
    fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd_ < 0) {
      last_error = Errno(errno);
      continue;
    }
    int error = 0;
    if (::connect(fd_, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        error = ETIMEDOUT;
        if (WaitReady(fd_, POLLOUT, deadline)) {
          socklen_t size = sizeof(error);
          if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
            error = errno;
          }
        }
      }
    }
    if (error == 0) {
      return absl::OkStatus();
    }
    last_error = Errno(error);
    Close();
  }
  return absl::UnavailableError(absl::StrCat("cannot connect to ", host_, ":", port_, " (",
                                             protocol_ == StatsdProtocol::kUdp ? "udp" : "tcp",
                                             "): ", last_error));
}

absl::Status StatsdConnection::SendOne(const std::string& payload) {
  const absl::Time deadline = absl::Now() + kWriteTimeout;
  size_t at = 0;
  while (at < payload.size()) {
    const ssize_t n = ::send(fd_, payload.data() + at, payload.size() - at, MSG_NOSIGNAL);
    if (n >= 0) {
      // A datagram goes whole or not at all.
      at = protocol_ == StatsdProtocol::kUdp ? payload.size() : at + static_cast<size_t>(n);
      continue;
    }
    const int error = errno;
    if (error == EINTR) {
      continue;
    }
    if ((error == EAGAIN || error == EWOULDBLOCK) && WaitReady(fd_, POLLOUT, deadline)) {
      continue;
    }
    Close();
    return absl::UnavailableError(
        absl::StrCat("sending to ", host_, ":", port_, ": ",
                     error == EAGAIN || error == EWOULDBLOCK ? "timed out" : Errno(error)));
  }
  return absl::OkStatus();
}

absl::Status StatsdConnection::Send(const std::vector<std::string>& payloads, size_t* sent) {
  if (sent != nullptr) {
    *sent = 0;
  }
  if (payloads.empty()) {
    return absl::OkStatus();
  }
  if (fd_ < 0) {
    if (absl::Status connected = Connect(); !connected.ok()) {
      return connected;
    }
  }
  for (const std::string& payload : payloads) {
    if (absl::Status one = SendOne(payload); !one.ok()) {
      return one;
    }
    if (sent != nullptr) {
      ++*sent;
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
