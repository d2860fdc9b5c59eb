// The socket under a Redis connection, TLS or not: where to connect, the non-blocking connect,
// and a byte stream over the connected socket that is plain or TLS (OpenSSL) alike for the
// connection above it. Shared by the event-driven RedisWire and the blocking RedisSyncClient.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/redis/tls_context.h"

namespace sluice {

struct RedisEndpoint {
  std::string host{};  // an IP literal or a name (resolved, blocking, at each connect)
  int port = 6379;
  std::string unix_path{};  // not empty: this unix domain socket instead of host:port

  // "host:port" or "unix:path", for messages.
  std::string ToString() const;
  bool operator==(const RedisEndpoint&) const = default;
};

// A non-blocking socket whose connect to `endpoint` has started (or finished). TCP sockets get
// TCP_NODELAY and keepalive probes. The error names the endpoint.
absl::StatusOr<int> StartSocketConnect(const RedisEndpoint& endpoint);

// The result of the non-blocking connect of `fd`, once the socket is writable: OK or why not.
absl::Status SocketConnectResult(int fd);

// What a read or write on a Stream did.
struct StreamIo {
  enum Kind {
    kDone,       // `bytes` moved (> 0)
    kWantRead,   // nothing moved: try again when the socket is readable
    kWantWrite,  // nothing moved: try again when the socket is writable
    kClosed,     // the peer closed the connection (reads only)
    kFailed,     // `error` says why
  };
  Kind kind = kDone;
  size_t bytes = 0;
  std::string error{};
  // kFailed by TLS itself (an alert from the server, a certificate refused after the handshake
  // as TLS 1.3 reports it, a protocol error), not by the socket.
  bool tls_error = false;
};

// Bytes over a connected non-blocking socket, plain or TLS; owns neither the socket nor the
// events. Not thread-safe: one thread at a time (the connection's lock).
class Stream {
 public:
  // Plain when `ssl` is null; else TLS over `fd` with `ssl` (a client session; Handshake first).
  Stream(int fd, SslPtr ssl);

  bool tls() const { return ssl_ != nullptr; }
  // TLS only: one step of the client handshake. kDone when finished; kFailed with the reason
  // (the certificate check's verdict when that is what failed).
  StreamIo Handshake();
  // Up to `size` bytes. TLS may hold bytes read from the socket that it has not returned yet,
  // which no socket event announces: call again while pending().
  StreamIo Read(char* data, size_t size);
  StreamIo Write(absl::string_view data);
  // TLS: the session holds bytes read from the socket (whole records, or the rest of one).
  bool pending() const;

 private:
  StreamIo SslResult(int ret, absl::string_view what);

  int fd_;
  SslPtr ssl_;
};

}  // namespace sluice
