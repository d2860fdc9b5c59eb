#include "tests/support/statsd_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace sluice::testing {

StatsdListener::StatsdListener(Protocol protocol, int port) : protocol_(protocol) {
  fd_ = ::socket(AF_INET, (protocol == Protocol::kUdp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC,
                 0);
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (protocol == Protocol::kTcp && ::listen(fd_, 16) != 0)) {
    ADD_FAILURE() << "statsd listener cannot bind 127.0.0.1:" << port << ": "
                  << std::strerror(errno);
    return;
  }
  socklen_t size = sizeof(addr);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &size);
  port_ = ntohs(addr.sin_port);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { Read(); });
}

StatsdListener::~StatsdListener() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (stop_fd_ >= 0) {
    ::close(stop_fd_);
  }
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

std::string StatsdListener::address() const { return absl::StrCat("127.0.0.1:", port_); }

void StatsdListener::Read() {
  std::vector<int> connections;
  std::vector<char> buffer(1 << 16);
  while (true) {
    std::vector<pollfd> fds = {{stop_fd_, POLLIN, 0}, {fd_, POLLIN, 0}};
    for (int c : connections) {
      fds.push_back({c, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (fds[0].revents != 0) {
      break;
    }
    if (fds[1].revents != 0) {
      if (protocol_ == Protocol::kTcp) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          connections.push_back(c);
        }
      } else {
        const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
        if (n > 0) {
          MutexLock lock(mu_);
          datagrams_.emplace_back(buffer.data(), static_cast<size_t>(n));
          stream_.append(buffer.data(), static_cast<size_t>(n));
          changed_.NotifyAll();
        }
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      const ssize_t n = ::recv(fds[i].fd, buffer.data(), buffer.size(), 0);
      if (n <= 0) {
        ::close(fds[i].fd);
        connections.erase(std::find(connections.begin(), connections.end(), fds[i].fd));
        continue;
      }
      MutexLock lock(mu_);
      stream_.append(buffer.data(), static_cast<size_t>(n));
      changed_.NotifyAll();
    }
  }
  for (int c : connections) {
    ::close(c);
  }
}

std::vector<std::string> StatsdListener::Lines() const {
  MutexLock lock(mu_);
  std::vector<std::string> lines;
  // Only whole lines: a TCP stream may end inside one.
  const size_t end = stream_.rfind('\n');
  if (end == std::string::npos) {
    return lines;
  }
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(stream_).substr(0, end), '\n', absl::SkipEmpty())) {
    lines.emplace_back(line);
  }
  return lines;
}

std::vector<std::string> StatsdListener::Datagrams() const {
  MutexLock lock(mu_);
  return datagrams_;
}

std::vector<std::string> StatsdListener::WaitFor(
    const std::function<bool(const std::vector<std::string>&)>& done,
    std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::vector<std::string> lines = Lines();
    if (done(lines) || std::chrono::steady_clock::now() >= deadline) {
      return lines;
    }
    MutexLock lock(mu_);
    changed_.WaitUntil(mu_, std::min(deadline, std::chrono::steady_clock::now() +
                                                   std::chrono::milliseconds(100)));
  }
}

std::map<std::string, uint64_t> StatsdListener::SumCounters(
    const std::vector<std::string>& lines) {
  std::map<std::string, uint64_t> sums;
  for (const std::string& line : lines) {
    const size_t colon = line.rfind(':');
    if (colon == std::string::npos || !absl::EndsWith(line, "|c")) {
      continue;
    }
    uint64_t value = 0;
    if (absl::SimpleAtoi(absl::string_view(line).substr(colon + 1, line.size() - colon - 3),
                         &value)) {
      sums[line.substr(0, colon)] += value;
    }
  }
  return sums;
}

}  // namespace sluice::testing
