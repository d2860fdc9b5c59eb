#include "server/trace/otlp/http_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"

namespace sluice {
namespace {

// Larger response headers than any collector sends: the response is not what we expect.
constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxLineBytes = 4096;

std::string Errno(int error) { return std::strerror(error); }

// The latest OpenSSL error, or `fallback` when its queue is empty.
std::string SslError(absl::string_view fallback) {
  const unsigned long error = ERR_get_error();
  if (error == 0) {
    return std::string(fallback);
  }
  char text[256];
  ERR_error_string_n(error, text, sizeof(text));
  return text;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr address;
  return inet_pton(AF_INET, host.c_str(), &address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

// OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE when the peer has gone; a
// library must not depend on the process ignoring it. This BIO moves the bytes with send(2) and
// MSG_NOSIGNAL. The descriptor is the BIO's data; the BIO never closes it.
int SocketFd(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(SocketFd(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(n);
}

int BioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(SocketFd(bio), data, static_cast<size_t>(size), 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return static_cast<int>(n);
}

long BioCtrl(BIO* bio, int command, long number, void* pointer) {
  // Writes go straight to the socket: there is nothing to flush. Nothing else is supported.
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

const BIO_METHOD* SocketBioMethod() {
  static const BIO_METHOD* const method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice-otlp");
    BIO_meth_set_write(made, BioWrite);
    BIO_meth_set_read(made, BioRead);
    BIO_meth_set_ctrl(made, BioCtrl);
    return made;
  }();
  return method;
}

// Parses a chunk-size line's hexadecimal number (extensions after ';' ignored).
std::optional<uint64_t> ChunkSize(absl::string_view line) {
  absl::string_view digits = absl::StripAsciiWhitespace(line.substr(0, line.find(';')));
  if (digits.empty() || digits.size() > 15) {
    return std::nullopt;
  }
  uint64_t size = 0;
  for (char c : digits) {
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    size = size * 16 + static_cast<uint64_t>(digit);
  }
  return size;
}

void Keep(absl::string_view data, HttpResponse* response) {
  const size_t room = HttpClient::kKeptBodyBytes - response->body_start.size();
  response->body_start.append(data.data(), std::min(room, data.size()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpUrl& url,
                                                                const std::string& ca_file) {
  if (!url.tls) {
    return std::unique_ptr<HttpClient>(new HttpClient(url, nullptr));
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("TLS for ", url.ToString(), ": ",
                                            SslError("cannot make an SSL_CTX")));
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // Collectors often end a close-delimited body without close_notify: that is the body's end.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  const bool loaded = ca_file.empty()
                          ? SSL_CTX_set_default_verify_paths(ctx) == 1
                          : SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) == 1;
  if (!loaded) {
    std::string why = SslError("no certificate in it");
    SSL_CTX_free(ctx);
    if (ca_file.empty()) {
      return absl::InternalError(
          absl::StrCat("TLS for ", url.ToString(), ": the system's CAs cannot be loaded: ", why));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "CA file ", ca_file, " for ", url.ToString(), ": cannot read PEM certificates: ", why));
  }
  return std::unique_ptr<HttpClient>(new HttpClient(url, ctx));
}

HttpClient::~HttpClient() {
  Close();
  if (ctx_ != nullptr) {
    SSL_CTX_free(ctx_);
  }
}

absl::StatusOr<HttpResponse> HttpClient::Post(
    absl::string_view path, absl::string_view content_type,
    absl::Span<const std::pair<std::string, std::string>> headers, absl::string_view body,
    absl::Duration timeout) {
  // Deadlines of blocking I/O are real time: poll(2) waits in real time.
  const Deadline deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  timeout_ = timeout;
  std::string request = absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: ", url_.HostHeader(),
                                     "\r\nContent-Type: ", content_type,
                                     "\r\nContent-Length: ", body.size(), "\r\n");
  for (const auto& [name, value] : headers) {
    absl::StrAppend(&request, name, ": ", value, "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);

  for (int attempt = 0;; ++attempt) {
    if (fd_ >= 0 && !IdleConnectionUsable()) {
      Close();
    }
    const bool reused = fd_ >= 0;
    if (!reused) {
      absl::Status opened = Open(deadline);
      if (!opened.ok()) {
        Close();
        return opened;
      }
    }
    in_.clear();
    response_started_ = false;
    bool keep_alive = false;
    absl::Status sent = WriteAll(request, deadline);
    absl::StatusOr<HttpResponse> response =
        sent.ok() ? ReadResponse(deadline, &keep_alive) : absl::StatusOr<HttpResponse>(sent);
    if (response.ok()) {
      // Bytes after the response were never asked for: the connection is out of step.
      if (!keep_alive || !in_.empty()) {
        Close();
      }
      return response;
    }
    Close();
    // The server closed the kept-alive connection as the request went out (its idle timeout):
    // the request was not answered, so it goes once more on a new connection.
    if (reused && attempt == 0 && !response_started_ &&
        response.status().code() == absl::StatusCode::kUnavailable) {
      continue;
    }
    return response.status();
  }
}

absl::Status HttpClient::Open(Deadline deadline) {
  RETURN_IF_ERROR(Connect(deadline));
  if (ctx_ != nullptr) {
    RETURN_IF_ERROR(Handshake(deadline));
  }
  return absl::OkStatus();
}

absl::Status HttpClient::Connect(Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(url_.port);
  const int resolved = getaddrinfo(url_.host.c_str(), port.c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", url_.host, ": ", gai_strerror(resolved)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  std::string last_error = "no address";
  for (const addrinfo* address = found; address != nullptr; address = address->ai_next) {
    fd_ = ::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   address->ai_protocol);
    if (fd_ < 0) {
      last_error = Errno(errno);
      continue;
    }
    int error = 0;
    if (::connect(fd_, address->ai_addr, address->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        RETURN_IF_ERROR(Wait(POLLOUT, deadline, "connecting to"));
        socklen_t size = sizeof(error);
        if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
          error = errno;
        }
      }
    }
    if (error == 0) {
      const int one = 1;
      setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      ++connections_made_;
      return absl::OkStatus();
    }
    last_error = Errno(error);
    Close();
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", url_.Authority(), ": ", last_error));
}

absl::Status HttpClient::Handshake(Deadline deadline) {
  ERR_clear_error();
  ssl_ = SSL_new(ctx_);
  BIO* bio = ssl_ != nullptr ? BIO_new(SocketBioMethod()) : nullptr;
  if (bio == nullptr) {
    return absl::InternalError(absl::StrCat("TLS to ", url_.Authority(), ": ",
                                            SslError("cannot make a session")));
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd_)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);
  if (IsIpLiteral(url_.host)) {
    // The certificate must carry the address as an IP subject alternative name; SNI does not
    // take addresses.
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), url_.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_, url_.host.c_str());
    SSL_set1_host(ssl_, url_.host.c_str());
  }
  while (true) {
    ERR_clear_error();
    const int done = SSL_connect(ssl_);
    if (done == 1) {
      return absl::OkStatus();
    }
    const int error = SSL_get_error(ssl_, done);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      RETURN_IF_ERROR(Wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline,
                           "the TLS handshake with"));
      continue;
    }
    const long verified = SSL_get_verify_result(ssl_);
    if (verified != X509_V_OK) {
      return absl::UnavailableError(
          absl::StrCat("TLS handshake with ", url_.Authority(), ": the server's certificate is ",
                       "not accepted: ", X509_verify_cert_error_string(verified)));
    }
    const int saved_errno = errno;
    return absl::UnavailableError(absl::StrCat(
        "TLS handshake with ", url_.Authority(), " failed: ",
        SslError(error == SSL_ERROR_SYSCALL && saved_errno != 0 ? Errno(saved_errno)
                                                                : "the connection closed")));
  }
}

void HttpClient::Close() {
  if (ssl_ != nullptr) {
    SSL_free(ssl_);  // frees the BIO; the descriptor is closed below
    ssl_ = nullptr;
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  in_.clear();
}

bool HttpClient::IdleConnectionUsable() const {
  pollfd ready{fd_, POLLIN, 0};
  return ::poll(&ready, 1, 0) == 0;
}

absl::Status HttpClient::Broken(absl::string_view what) const {
  return absl::UnavailableError(absl::StrCat(what, " (", url_.Authority(), ")"));
}

absl::Status HttpClient::Wait(short events, Deadline deadline, absl::string_view doing) {
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(doing, " ", url_.Authority(),
                                                      ": no progress within the timeout of ",
                                                      absl::FormatDuration(timeout_)));
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd ready{fd_, events, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (polled > 0) {
      return absl::OkStatus();  // an error or hang-up shows in the next read or write
    }
    if (polled < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll: ", Errno(errno)));
    }
  }
}

absl::StatusOr<long> HttpClient::Transfer(bool write, char* data, size_t size, short* want) {
  size = std::min<size_t>(size, INT_MAX);
  if (ssl_ == nullptr) {
    while (true) {
      const ssize_t n = write ? ::send(fd_, data, size, MSG_NOSIGNAL) : ::recv(fd_, data, size, 0);
      if (n >= 0) {
        return static_cast<long>(n);
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *want = write ? POLLOUT : POLLIN;
        return -1;
      }
      if (errno != EINTR) {
        return Broken(absl::StrCat(write ? "sending: " : "receiving: ", Errno(errno)));
      }
    }
  }
  ERR_clear_error();
  const int n = write ? SSL_write(ssl_, data, static_cast<int>(size))
                      : SSL_read(ssl_, data, static_cast<int>(size));
  if (n > 0) {
    return static_cast<long>(n);
  }
  const int saved_errno = errno;
  switch (SSL_get_error(ssl_, n)) {
    case SSL_ERROR_WANT_READ:
      *want = POLLIN;
      return -1;
    case SSL_ERROR_WANT_WRITE:
      *want = POLLOUT;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0 && (n == 0 || saved_errno == 0)) {
        return 0;
      }
      return Broken(absl::StrCat(write ? "sending: " : "receiving: ",
                                 SslError(Errno(saved_errno))));
    default:
      return Broken(absl::StrCat("TLS: ", SslError("protocol error")));
  }
}

absl::Status HttpClient::WriteAll(absl::string_view data, Deadline deadline) {
  while (!data.empty()) {
    short want = 0;
    ASSIGN_OR_RETURN(const long n,
                     Transfer(/*write=*/true, const_cast<char*>(data.data()), data.size(), &want));
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n == 0) {
      return Broken("the connection closed while the request was sent");
    } else {
      RETURN_IF_ERROR(Wait(want, deadline, "sending the request to"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> HttpClient::Fill(Deadline deadline) {
  char buffer[16 * 1024];
  while (true) {
    short want = 0;
    ASSIGN_OR_RETURN(const long n, Transfer(/*write=*/false, buffer, sizeof(buffer), &want));
    if (n > 0) {
      in_.append(buffer, static_cast<size_t>(n));
      response_started_ = true;
      return true;
    }
    if (n == 0) {
      return false;
    }
    RETURN_IF_ERROR(Wait(want, deadline, "waiting for the response of"));
  }
}

absl::StatusOr<std::string> HttpClient::ReadLine(Deadline deadline) {
  size_t end = 0;
  while ((end = in_.find("\r\n")) == std::string::npos) {
    if (in_.size() > kMaxLineBytes) {
      return Broken("a line of the response is too long");
    }
    ASSIGN_OR_RETURN(const bool more, Fill(deadline));
    if (!more) {
      return Broken("the connection closed in the response");
    }
  }
  std::string line = in_.substr(0, end);
  in_.erase(0, end + 2);
  return line;
}

absl::Status HttpClient::ReadBody(size_t size, Deadline deadline, HttpResponse* response) {
  while (size > 0) {
    if (in_.empty()) {
      ASSIGN_OR_RETURN(const bool more, Fill(deadline));
      if (!more) {
        return Broken("the connection closed in the response body");
      }
    }
    const size_t take = std::min(size, in_.size());
    Keep(absl::string_view(in_).substr(0, take), response);
    in_.erase(0, take);
    size -= take;
  }
  return absl::OkStatus();
}

absl::Status HttpClient::ReadChunkedBody(Deadline deadline, HttpResponse* response) {
  while (true) {
    ASSIGN_OR_RETURN(const std::string size_line, ReadLine(deadline));
    const std::optional<uint64_t> size = ChunkSize(size_line);
    if (!size.has_value()) {
      return Broken(absl::StrCat("bad chunk size \"", size_line, "\" in the response"));
    }
    if (*size == 0) {
      // Trailer fields, then the empty line that ends the message.
      while (true) {
        ASSIGN_OR_RETURN(const std::string trailer, ReadLine(deadline));
        if (trailer.empty()) {
          return absl::OkStatus();
        }
      }
    }
    RETURN_IF_ERROR(ReadBody(*size, deadline, response));
    ASSIGN_OR_RETURN(const std::string end, ReadLine(deadline));
    if (!end.empty()) {
      return Broken("a chunk of the response does not end where its size says");
    }
  }
}

absl::StatusOr<HttpResponse> HttpClient::ReadResponse(Deadline deadline, bool* keep_alive) {
  HttpResponse response;
  bool http10 = false;
  bool chunked = false;
  // A transfer coding other than chunked: the body runs to the connection's close.
  bool other_coding = false;
  bool close = false;
  bool keep_alive_token = false;
  // Content-Length's; -1 when absent. (Not std::optional: GCC 12 warns of it as uninitialized.)
  int64_t content_length = -1;
  // Interim (1xx) responses come before the final one; they are skipped.
  while (response.status < 200) {
    size_t header_end = 0;
    while ((header_end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (in_.size() > kMaxHeaderBytes) {
        return Broken("the response's headers exceed 64 KiB");
      }
      ASSIGN_OR_RETURN(const bool more, Fill(deadline));
      if (!more) {
        return Broken(in_.empty() ? "the connection closed without a response"
                                  : "the connection closed in the response's headers");
      }
    }
    const std::string head = in_.substr(0, header_end);
    in_.erase(0, header_end + 4);
    std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
    response.status_line = std::string(lines[0]);
    // "HTTP/1.1 200 OK"
    absl::string_view status_line = lines[0];
    if (!absl::ConsumePrefix(&status_line, "HTTP/1.") || status_line.size() < 5 ||
        status_line[1] != ' ' || !absl::SimpleAtoi(status_line.substr(2, 3), &response.status) ||
        response.status < 100 || response.status > 999 ||
        (status_line.size() > 5 && status_line[5] != ' ')) {
      return Broken(absl::StrCat("not an HTTP/1.x response: \"",
                                 absl::CHexEscape(response.status_line.substr(0, 64)), "\""));
    }
    if (response.status == 101) {
      return Broken("the server switched protocols");
    }
    http10 = status_line[0] == '0';
    chunked = other_coding = close = keep_alive_token = false;
    content_length = -1;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == absl::string_view::npos) {
        return Broken(absl::StrCat("a header line without a colon in the response: \"",
                                   absl::CHexEscape(lines[i].substr(0, 64)), "\""));
      }
      const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
      const std::string value =
          absl::AsciiStrToLower(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
      if (name == "content-length") {
        int64_t length = 0;
        if (!absl::SimpleAtoi(value, &length) || length < 0 ||
            (content_length >= 0 && content_length != length)) {
          return Broken(absl::StrCat("bad Content-Length \"", value, "\" in the response"));
        }
        content_length = length;
      } else if (name == "transfer-encoding") {
        chunked = absl::EndsWith(value, "chunked");
        other_coding = !chunked;
      } else if (name == "connection") {
        for (absl::string_view token : absl::StrSplit(value, ',')) {
          token = absl::StripAsciiWhitespace(token);
          close = close || token == "close";
          keep_alive_token = keep_alive_token || token == "keep-alive";
        }
      }
    }
  }
  *keep_alive = !close && (!http10 || keep_alive_token);
  if (response.status == 204 || response.status == 304) {
    return response;
  }
  if (chunked) {
    RETURN_IF_ERROR(ReadChunkedBody(deadline, &response));
  } else if (content_length >= 0 && !other_coding) {
    RETURN_IF_ERROR(ReadBody(static_cast<size_t>(content_length), deadline, &response));
  } else {
    // Delimited by the connection's close.
    *keep_alive = false;
    while (true) {
      Keep(in_, &response);
      in_.clear();
      ASSIGN_OR_RETURN(const bool more, Fill(deadline));
      if (!more) {
        break;
      }
    }
  }
  return response;
}

}  // namespace sluice
