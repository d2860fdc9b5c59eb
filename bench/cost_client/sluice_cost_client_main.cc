// sluice-cost-client: the load of bench/cost. Sends exactly --requests calls, one after the
// other on one connection, over gRPC (ShouldRateLimit) or HTTP/1.1 keep-alive (POST /json), so
// that the server under callgrind does the same work on every run and the count of decisions is
// known exactly. Not a load generator (that is sluice-bench): it measures nothing but counts.
//
//   sluice-cost-client --server=HOST:PORT --requests=N --domain=D --descriptors=M [--keyspace=K]
//   sluice-cost-client --http=PORT ...          (POST /json on 127.0.0.1:PORT)
//
// Descriptor i of request n is the entry key_i=v<n mod keyspace> (key_0 = "key", key_i =
// "key<i+1>", as sluice-bench names them). Prints one JSON object:
//   {"requests":N,"ok":A,"over_limit":B,"errors":C}
// and exits 1 if any call failed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/rls_client.h"

ABSL_FLAG(std::string, server, "", "gRPC: RLS v3 server, HOST:PORT");
ABSL_FLAG(int32_t, http, 0, "HTTP: port of Sluice's /json on 127.0.0.1 (instead of --server)");
ABSL_FLAG(int64_t, requests, 1000, "calls to send, one after the other");
ABSL_FLAG(std::string, domain, "bench", "domain of every request");
ABSL_FLAG(int32_t, descriptors, 1, "descriptors per request");
ABSL_FLAG(int32_t, keyspace, 1000, "distinct values of each descriptor, cycled in order");

namespace sluice {
namespace {

struct Counts {
  int64_t ok = 0;
  int64_t over_limit = 0;
  int64_t errors = 0;
};

std::string Key(int i) { return i == 0 ? "key" : absl::StrCat("key", i + 1); }

Counts RunGrpc(int64_t requests, const std::string& domain, int descriptors, int keyspace) {
  RlsClient client(absl::GetFlag(FLAGS_server));
  RlsRequest request;
  request.set_domain(domain);
  for (int i = 0; i < descriptors; ++i) {
    request.add_descriptors()->add_entries()->set_key(Key(i));
  }
  Counts counts;
  for (int64_t n = 0; n < requests; ++n) {
    const std::string value = absl::StrCat("v", n % keyspace);
    for (auto& descriptor : *request.mutable_descriptors()) {
      descriptor.mutable_entries(0)->set_value(value);
    }
    auto response = client.ShouldRateLimit(request, absl::Seconds(60));
    if (!response.ok()) {
      ++counts.errors;
      std::fprintf(stderr, "sluice-cost-client: %s\n", response.status().ToString().c_str());
    } else if (response->overall_code() == RlsResponse::OVER_LIMIT) {
      ++counts.over_limit;
    } else {
      ++counts.ok;
    }
  }
  return counts;
}

// One HTTP/1.1 connection, kept alive: writes a request, reads one response (headers, then
// Content-Length bytes of body) and returns its status code, or -1 on any I/O or parse error.
class HttpConnection {
 public:
  explicit HttpConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~HttpConnection() {
    if (fd_ >= 0) ::close(fd_);
  }

  int Post(absl::string_view path, absl::string_view body) {
    if (fd_ < 0) return -1;
    const std::string request =
        absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
                     "Content-Length: ", body.size(), "\r\n\r\n", body);
    if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      return -1;
    }
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return -1;
    }
    const absl::string_view headers(buffer_.data(), header_end);
    int status = 0;
    if (headers.size() < 12 || !absl::SimpleAtoi(headers.substr(9, 3), &status)) return -1;
    size_t length = 0;
    const size_t at = headers.find("Content-Length: ");
    if (at == absl::string_view::npos ||
        !absl::SimpleAtoi(headers.substr(at + 16, headers.find("\r\n", at) - at - 16), &length)) {
      return -1;
    }
    const size_t total = header_end + 4 + length;
    while (buffer_.size() < total) {
      if (!Fill()) return -1;
    }
    buffer_.erase(0, total);
    return status;
  }

 private:
  bool Fill() {
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

Counts RunHttp(int64_t requests, const std::string& domain, int descriptors, int keyspace) {
  HttpConnection connection(absl::GetFlag(FLAGS_http));
  Counts counts;
  for (int64_t n = 0; n < requests; ++n) {
    std::string body = absl::StrCat(R"({"domain":")", domain, R"(","descriptors":[)");
    for (int i = 0; i < descriptors; ++i) {
      absl::StrAppend(&body, i == 0 ? "" : ",", R"({"entries":[{"key":")", Key(i),
                      R"(","value":"v)", n % keyspace, R"("}]})");
    }
    body += "]}";
    const int status = connection.Post("/json", body);
    if (status == 200) {
      ++counts.ok;
    } else if (status == 429) {
      ++counts.over_limit;
    } else {
      ++counts.errors;
      std::fprintf(stderr, "sluice-cost-client: POST /json: status %d\n", status);
      if (status < 0) break;
    }
  }
  return counts;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sluice-cost-client (--server=HOST:PORT | --http=PORT) --requests=N --domain=D "
      "--descriptors=M [--keyspace=K]: N calls one after the other; prints the counts as JSON");
  absl::ParseCommandLine(argc, argv);
  const int64_t requests = absl::GetFlag(FLAGS_requests);
  const int descriptors = absl::GetFlag(FLAGS_descriptors);
  const int keyspace = absl::GetFlag(FLAGS_keyspace);
  if (requests < 1 || descriptors < 1 || keyspace < 1 ||
      absl::GetFlag(FLAGS_server).empty() == (absl::GetFlag(FLAGS_http) == 0)) {
    std::fprintf(stderr, "usage: %s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  const std::string domain = absl::GetFlag(FLAGS_domain);
  const sluice::Counts counts =
      absl::GetFlag(FLAGS_http) != 0
          ? sluice::RunHttp(requests, domain, descriptors, keyspace)
          : sluice::RunGrpc(requests, domain, descriptors, keyspace);
  std::printf("{\"requests\":%lld,\"ok\":%lld,\"over_limit\":%lld,\"errors\":%lld}\n",
              static_cast<long long>(requests), static_cast<long long>(counts.ok),
              static_cast<long long>(counts.over_limit), static_cast<long long>(counts.errors));
  return counts.errors == 0 ? 0 : 1;
}
