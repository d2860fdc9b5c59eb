// A small blocking HTTP/1.1 client for OTLP/HTTP: POST requests to one origin (http or https),
// one at a time, over one connection kept alive between requests and made again when it breaks.
// Each request has one overall deadline for all of it: connecting, the TLS handshake, sending,
// and reading the whole response. TLS is OpenSSL's: the server's certificate is checked against
// the given CA file or the system's CAs, and must name the host (DNS name or IP address).
//
// Name resolution (getaddrinfo) blocks outside the deadline's reach; with a collector named in
// /etc/hosts or by IP address it is immediate.
//
// Thread-compatible: one thread at a time (the exporter's, where blocking is fine).
#pragma once

#include <openssl/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/trace/otlp/http_url.h"

namespace sluice {

struct HttpResponse {
  // The status code: 200.
  int status = 0;
  // As received, without its CRLF: "HTTP/1.1 503 Service Unavailable".
  std::string status_line;
  // The start of the body (the rest is read and discarded), for error messages.
  std::string body_start;
};

class HttpClient {
 public:
  // How much of a response's body HttpResponse::body_start keeps.
  static constexpr size_t kKeptBodyBytes = 256;

  // A client of `url`'s origin (its path is not used: each request names its own). With https,
  // `ca_file` (PEM certificates) is read now, kInvalidArgument naming it if it cannot be; empty
  // means the system's default CAs. Does not connect yet.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(const HttpUrl& url,
                                                            const std::string& ca_file);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` to `path` with Host, Content-Type, Content-Length and `headers` (REQUIRES: valid
  // header names and values, none of those three), and reads the whole response, all within
  // `timeout`. A response of any status is a response: the caller judges it. Errors:
  // kDeadlineExceeded when the timeout passes; kUnavailable when the origin cannot be reached,
  // the connection breaks, the TLS handshake fails, or the response is not HTTP/1.x. A kept-alive
  // connection that the server closed while idle is replaced, and the request sent again on the
  // new one, when no byte of a response had come.
  absl::StatusOr<HttpResponse> Post(absl::string_view path, absl::string_view content_type,
                                    absl::Span<const std::pair<std::string, std::string>> headers,
                                    absl::string_view body, absl::Duration timeout);

  // Connections made so far (a reused connection is not counted again).
  int connections_made() const { return connections_made_; }

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  HttpClient(HttpUrl url, SSL_CTX* ctx) : url_(std::move(url)), ctx_(ctx) {}

  absl::Status Open(Deadline deadline);
  absl::Status Connect(Deadline deadline);
  absl::Status Handshake(Deadline deadline);
  void Close();
  // False when the idle connection has something to read: the server closed it (or sent bytes
  // nobody asked for), so it cannot carry a request.
  bool IdleConnectionUsable() const;
  // Waits until the socket is ready for `events` (POLLIN, POLLOUT), or the deadline.
  absl::Status Wait(short events, Deadline deadline, absl::string_view doing);
  // One read or write: > 0 bytes moved, 0 the peer closed (reads), -1 nothing yet with
  // *want the poll events to wait for.
  absl::StatusOr<long> Transfer(bool write, char* data, size_t size, short* want);
  absl::Status WriteAll(absl::string_view data, Deadline deadline);
  // Reads more into in_; false at the end of the stream.
  absl::StatusOr<bool> Fill(Deadline deadline);
  absl::StatusOr<std::string> ReadLine(Deadline deadline);
  absl::Status ReadBody(size_t size, Deadline deadline, HttpResponse* response);
  absl::Status ReadChunkedBody(Deadline deadline, HttpResponse* response);
  absl::StatusOr<HttpResponse> ReadResponse(Deadline deadline, bool* keep_alive);
  absl::Status Broken(absl::string_view what) const;

  const HttpUrl url_;
  SSL_CTX* const ctx_;  // null for http
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  // Received and not yet parsed.
  std::string in_;
  // A byte of the current request's response has come.
  bool response_started_ = false;
  // The current request's, for messages.
  absl::Duration timeout_;
  int connections_made_ = 0;
};

}  // namespace sluice
