#include "server/redis/sync_client.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/log_text.h"
#include "server/redis/command.h"

namespace sluice {
absl::StatusOr<std::unique_ptr<RedisSyncClient>> RedisSyncClient::Connect(
    const RedisEndpoint& endpoint, TlsClientContext* tls, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string address = endpoint.ToString();
  SslPtr ssl;
  if (tls != nullptr) {
    absl::StatusOr<SslPtr> session = tls->NewSession(endpoint.host);
    if (!session.ok()) {
      return session.status();
    }
    ssl = std::move(*session);
  }
  absl::StatusOr<int> fd = StartSocketConnect(endpoint);
  if (!fd.ok()) {
    return absl::UnavailableError(absl::StrCat("redis ", address, ": ", fd.status().message()));
  }
  std::unique_ptr<RedisSyncClient> client(
      new RedisSyncClient(*fd, std::move(ssl), address, timeout));
  if (!client->Wait(/*for_read=*/false, deadline)) {
    return client->Fail("cannot connect: timed out");
  }
  if (absl::Status connected = SocketConnectResult(*fd); !connected.ok()) {
    return client->Fail(absl::StrCat("cannot connect: ", connected.message()));
  }
  while (client->stream_.tls()) {
    StreamIo io = client->stream_.Handshake();
    if (io.kind == StreamIo::kDone) {
      break;
    }
    if (io.kind == StreamIo::kFailed || io.kind == StreamIo::kClosed) {
      return client->Fail(io.error);
    }
    if (!client->Wait(io.kind == StreamIo::kWantRead, deadline)) {
      return client->Fail("TLS handshake timed out");
    }
  }
  return client;
}

RedisSyncClient::RedisSyncClient(int fd, SslPtr ssl, std::string address, absl::Duration timeout)
    : fd_(fd),
      stream_(fd, std::move(ssl)),
      address_(std::move(address)),
      timeout_(timeout) {}

RedisSyncClient::~RedisSyncClient() { close(fd_); }

absl::Status RedisSyncClient::Fail(absl::string_view what) const {
  return absl::UnavailableError(absl::StrCat("redis ", address_, ": ", what));
}

bool RedisSyncClient::Wait(bool for_read, absl::Time deadline) const {
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      return false;
    }
    pollfd p{fd_, static_cast<short>(for_read ? POLLIN : POLLOUT), 0};
    const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 60000)));
    if (rc > 0) {
      return true;  // ready, or an error the next read or write reports
    }
    if (rc < 0 && errno != EINTR) {
      return false;
    }
  }
}

absl::StatusOr<RedisReply> RedisSyncClient::Run(std::initializer_list<std::string_view> args) {
  const std::string name(*args.begin());
  if (absl::Status sent = Send(args); !sent.ok()) {
    return sent;
  }
  absl::StatusOr<std::optional<RedisReply>> reply = Read(timeout_);
  if (!reply.ok()) {
    return reply.status();
  }
  if (!reply->has_value()) {
    return Fail(absl::StrCat(name, ": no reply within ", absl::FormatDuration(timeout_)));
  }
  return **std::move(reply);
}

absl::Status RedisSyncClient::Authenticate(std::string_view username, std::string_view password) {
  if (password.empty()) {
    return absl::OkStatus();
  }
  absl::StatusOr<RedisReply> reply =
      username.empty() ? Run({"AUTH", password}) : Run({"AUTH", username, password});
  if (!reply.ok()) {
    return reply.status();
  }
  if (reply->is_error()) {
    return absl::FailedPreconditionError(
        absl::StrCat("redis ", address_, ": AUTH failed: ", LogText(reply->str())));
  }
  return absl::OkStatus();
}

absl::Status RedisSyncClient::Send(std::initializer_list<std::string_view> args) {
  const absl::Time deadline = absl::Now() + timeout_;
  std::string out;
  AppendRespCommand(absl::MakeConstSpan(args.begin(), args.size()), &out);
  const std::string name(*args.begin());
  for (size_t sent = 0; sent < out.size();) {
    StreamIo io = stream_.Write(absl::string_view(out).substr(sent));
    if (io.kind == StreamIo::kDone) {
      sent += io.bytes;
    } else if (io.kind == StreamIo::kFailed || io.kind == StreamIo::kClosed) {
      return Fail(absl::StrCat(name, ": ", io.error));
    } else if (!Wait(io.kind == StreamIo::kWantRead, deadline)) {
      return Fail(absl::StrCat(name, ": timed out writing"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<RedisReply>> RedisSyncClient::Read(absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  char buf[16 * 1024];
  for (;;) {
    switch (reader_.Next()) {
      case RedisReplyReader::Result::kReply:
        return std::move(*reader_.reply());
      case RedisReplyReader::Result::kError:
        return Fail(absl::StrCat("protocol error: ", reader_.error()));
      case RedisReplyReader::Result::kNone:
        break;
    }
    StreamIo io = stream_.Read(buf, sizeof(buf));
    if (io.kind == StreamIo::kDone) {
      if (!reader_.Feed(buf, io.bytes)) {
        return Fail("out of memory reading replies");
      }
    } else if (io.kind == StreamIo::kClosed) {
      return Fail("the server closed the connection");
    } else if (io.kind == StreamIo::kFailed) {
      return Fail(io.error);
    } else if (!Wait(io.kind == StreamIo::kWantRead, deadline)) {
      return std::nullopt;
    }
  }
}

}  // namespace sluice
