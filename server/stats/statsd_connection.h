// The statsd sink's socket: UDP (each payload one datagram) or TCP (payloads written in order on
// one connection), to HOST:PORT. It behaves as upstream's clients do:
//   - gostats' net sink dials with a 1.5 s timeout and writes with a 1 s one, closes the
//     connection on a failed write and dials again later (net_sink.go); a UDP "connection" is a
//     connected socket, so the ICMP refusal of a port nobody listens on surfaces as an error on
//     a later send, and the next Send resolves and connects again;
//   - the name is resolved at each (re)connect, IPv4 addresses tried first (Go reads /etc/hosts
//     in its order, where "localhost" is 127.0.0.1 first).
// Nothing here is on the request path: the sink's flush thread calls it, and may block for the
// timeouts above.
//
// Not thread-safe: one thread uses it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sluice {

enum class StatsdProtocol { kUdp, kTcp };

class StatsdConnection {
 public:
  static constexpr absl::Duration kConnectTimeout = absl::Milliseconds(1500);
  static constexpr absl::Duration kWriteTimeout = absl::Seconds(1);

  // `address` is HOST:PORT or [IPv6]:PORT (ValidateHostPort), split as a Redis address is
  // (SplitHostPort); one that does not split makes every Send fail with kInvalidArgument.
  // Connects at the first Send.
  StatsdConnection(const std::string& address, StatsdProtocol protocol);
  ~StatsdConnection();
  StatsdConnection(const StatsdConnection&) = delete;
  StatsdConnection& operator=(const StatsdConnection&) = delete;

  // Sends `payloads` in order, connecting first if need be. kUnavailable when the name does not
  // resolve or no address takes the connection (nothing was sent), or when a send fails (those
  // before it were sent; the socket is closed, the next Send connects again). *sent, if given,
  // receives how many payloads were handed to the socket.
  absl::Status Send(const std::vector<std::string>& payloads, size_t* sent = nullptr);

  bool connected() const { return fd_ >= 0; }

 private:
  absl::Status Connect();
  absl::Status SendOne(const std::string& payload);
  void Close();

  std::string host_;  // brackets removed from an IPv6 literal
  std::string port_;  // decimal; empty when the address did not split
  const StatsdProtocol protocol_;
  int fd_ = -1;
};

}  // namespace sluice
