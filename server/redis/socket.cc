#include "server/redis/socket.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// Keepalive as hiredis sets it: idle for this long, then probes a third of it apart, three of
// them; so a silently dead peer is noticed within twice this.
constexpr int kKeepAliveSeconds = 15;

void TuneTcp(int fd) {
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  int idle = kKeepAliveSeconds;
  int interval = std::max(kKeepAliveSeconds / 3, 1);
  int count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

// The session's own socket I/O. OpenSSL's socket BIO writes with write(2), which raises SIGPIPE
// on a socket whose peer has gone and ends any process that has not ignored it (a library must
// not require that); this one sends with MSG_NOSIGNAL, as the plain path does.
int SocketOf(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int BioWrite(BIO* bio, const char* data, size_t size, size_t* written) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = send(SocketOf(bio), data, size, MSG_NOSIGNAL);
  if (n >= 0) {
    *written = static_cast<size_t>(n);
    return 1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    BIO_set_retry_write(bio);
  }
  return 0;
}

int BioRead(BIO* bio, char* data, size_t size, size_t* read_bytes) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = recv(SocketOf(bio), data, size, 0);
  if (n > 0) {
    *read_bytes = static_cast<size_t>(n);
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  if (n == 0) {
    errno = 0;  // an end of stream, not an error: SSL_get_error says SSL_ERROR_SYSCALL, errno 0
  }
  return 0;
}

long BioCtrl(BIO* /*bio*/, int cmd, long /*num*/, void* /*ptr*/) {
  // Writes go straight to the socket: nothing to flush. Every other request is unsupported.
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int BioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* SocketBioMethod() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice socket");
    BIO_meth_set_write_ex(m, &BioWrite);
    BIO_meth_set_read_ex(m, &BioRead);
    BIO_meth_set_ctrl(m, &BioCtrl);
    BIO_meth_set_create(m, &BioCreate);
    return m;
  }();
  return method;
}

}  // namespace

std::string RedisEndpoint::ToString() const {
  return unix_path.empty() ? absl::StrCat(host, ":", port) : absl::StrCat("unix:", unix_path);
}

absl::StatusOr<int> StartSocketConnect(const RedisEndpoint& endpoint) {
  if (!endpoint.unix_path.empty()) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (endpoint.unix_path.size() >= sizeof(addr.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unix socket path too long: ", endpoint.unix_path));
    }
    std::memcpy(addr.sun_path, endpoint.unix_path.data(), endpoint.unix_path.size());
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
        errno != EINPROGRESS && errno != EAGAIN) {
      std::string error = std::strerror(errno);
      close(fd);
      return absl::UnavailableError(absl::StrCat("connect ", endpoint.ToString(), ": ", error));
    }
    return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(endpoint.port);
  if (int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", endpoint.host, ": ", gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    TuneTcp(fd);
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("connect ", endpoint.ToString(), ": ", error));
  }
  return fd;
}

absl::Status SocketConnectResult(int fd) {
  int error = 0;
  socklen_t size = sizeof(error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
    error = errno;
  }
  if (error != 0) {
    return absl::UnavailableError(std::strerror(error));
  }
  return absl::OkStatus();
}

Stream::Stream(int fd, SslPtr ssl) : fd_(fd), ssl_(std::move(ssl)) {
  if (ssl_ != nullptr) {
    BIO* bio = BIO_new(SocketBioMethod());
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd_)));
    SSL_set_bio(ssl_.get(), bio, bio);  // the session owns it (one reference for both ends)
  }
}

StreamIo Stream::SslResult(int ret, absl::string_view what) {
  StreamIo io;
  switch (SSL_get_error(ssl_.get(), ret)) {
    case SSL_ERROR_WANT_READ:
      io.kind = StreamIo::kWantRead;
      return io;
    case SSL_ERROR_WANT_WRITE:
      io.kind = StreamIo::kWantWrite;
      return io;
    case SSL_ERROR_ZERO_RETURN:
      io.kind = StreamIo::kClosed;
      return io;
    case SSL_ERROR_SYSCALL: {
      const int saved = errno;
      io.kind = StreamIo::kFailed;
      io.error = TakeSslErrors("");
      if (io.error.empty()) {
        // An EOF without close_notify, or a socket error.
        if (ret == 0 || saved == 0) {
          io.kind = StreamIo::kClosed;
          return io;
        }
        io.error = std::strerror(saved);
      }
      io.error = absl::StrCat(what, ": ", io.error);
      return io;
    }
    default:
      io.kind = StreamIo::kFailed;
      io.tls_error = true;
      io.error = absl::StrCat(what, ": ", TakeSslErrors("OpenSSL error"));
      return io;
  }
}

// SSL_get_error reads the thread's error queue, which must hold nothing from before the call:
// cleared only when it holds something (clearing an empty queue costs as much as a small read).
static void ClearSslErrors() {
  if (ERR_peek_error() != 0) {
    ERR_clear_error();
  }
}

StreamIo Stream::Handshake() {
  ClearSslErrors();
  const int ret = SSL_connect(ssl_.get());
  if (ret == 1) {
    return StreamIo{};
  }
  StreamIo io = SslResult(ret, "TLS handshake failed");
  if (io.kind == StreamIo::kClosed) {
    io.kind = StreamIo::kFailed;
    io.error = "TLS handshake failed: the server closed the connection (does it speak TLS on "
               "this port, and accept this client's certificate?)";
  }
  if (io.kind == StreamIo::kFailed) {
    const long verdict = SSL_get_verify_result(ssl_.get());
    if (verdict != X509_V_OK) {
      io.error = absl::StrCat("TLS handshake failed: the server's certificate: ",
                              X509_verify_cert_error_string(verdict));
    }
  }
  return io;
}

StreamIo Stream::Read(char* data, size_t size) {
  StreamIo io;
  if (ssl_ == nullptr) {
    const ssize_t n = read(fd_, data, size);
    if (n > 0) {
      io.bytes = static_cast<size_t>(n);
    } else if (n == 0) {
      io.kind = StreamIo::kClosed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      io.kind = StreamIo::kWantRead;
    } else {
      io.kind = StreamIo::kFailed;
      io.error = std::strerror(errno);
    }
    return io;
  }
  ClearSslErrors();
  size_t n = 0;
  const int ret = SSL_read_ex(ssl_.get(), data, size, &n);
  if (ret == 1) {
    io.bytes = n;
    return io;
  }
  return SslResult(ret, "TLS read");
}

StreamIo Stream::Write(absl::string_view data) {
  StreamIo io;
  if (ssl_ == nullptr) {
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      io.bytes = static_cast<size_t>(n);
      if (n == 0) {
        io.kind = StreamIo::kWantWrite;
      }
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      io.kind = StreamIo::kWantWrite;
    } else {
      io.kind = StreamIo::kFailed;
      io.error = std::strerror(errno);
    }
    return io;
  }
  ClearSslErrors();
  size_t n = 0;
  const int ret = SSL_write_ex(ssl_.get(), data.data(), data.size(), &n);
  if (ret == 1) {
    io.bytes = n;
    return io;
  }
  io = SslResult(ret, "TLS write");
  if (io.kind == StreamIo::kClosed) {
    io.kind = StreamIo::kFailed;
    io.error = "TLS write: the connection is closed";
  }
  return io;
}

bool Stream::pending() const { return ssl_ != nullptr && SSL_has_pending(ssl_.get()) == 1; }

}  // namespace sluice
