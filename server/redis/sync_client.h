// A short-lived blocking connection to one Redis node for control work off the request path
// (the cluster's slot map; the sentinels): connect, the TLS handshake when asked, then commands
// one at a time, every step bounded by the timeout. Never on an I/O or request thread. Replies
// are read by RedisReplyReader within its default RedisReplyLimits, as on the request path: a
// reply past them (a hostile sentinel's or node's) is a failed exchange, not gigabytes.
//
// Not thread-safe: one thread uses a client.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/redis/reply.h"
#include "server/redis/socket.h"

namespace sluice {

class RedisSyncClient {
 public:
  // kUnavailable (naming `endpoint`) when it cannot connect in time or the TLS handshake fails.
  static absl::StatusOr<std::unique_ptr<RedisSyncClient>> Connect(const RedisEndpoint& endpoint,
                                                                  TlsClientContext* tls,
                                                                  absl::Duration timeout);
  ~RedisSyncClient();
  RedisSyncClient(const RedisSyncClient&) = delete;
  RedisSyncClient& operator=(const RedisSyncClient&) = delete;

  // Sends one command and waits for its reply, which may be an error reply. kUnavailable on a
  // failed or timed-out exchange, after which the client is of no further use.
  absl::StatusOr<RedisReply> Run(std::initializer_list<std::string_view> args);

  // AUTH with `password` alone (requirepass) or as `username`; OK at once without a password.
  // kFailedPrecondition when the server refuses, kUnavailable on a failed exchange.
  absl::Status Authenticate(std::string_view username, std::string_view password);

  // The two halves of Run, for a subscription: Send writes one command (within the timeout);
  // Read waits up to `wait` for the next reply or pushed message: nullopt if none came, and the
  // client stays usable.
  absl::Status Send(std::initializer_list<std::string_view> args);
  absl::StatusOr<std::optional<RedisReply>> Read(absl::Duration wait);

  const std::string& address() const { return address_; }

 private:
  RedisSyncClient(int fd, SslPtr ssl, std::string address, absl::Duration timeout);
  // Waits until `fd_` is readable (or writable); false at the deadline.
  bool Wait(bool for_read, absl::Time deadline) const;
  absl::Status Fail(absl::string_view what) const;

  const int fd_;
  Stream stream_;
  const std::string address_;
  const absl::Duration timeout_;
  RedisReplyReader reader_;
};

}  // namespace sluice
