// sluice-fake-ads: the tests' xDS management server (tests/support/fake_ads_server.h) as a
// process, serving one snapshot of RateLimitConfig resources, as Envoy Gateway's controller serves
// its rate limit service. scripts/check-image runs it beside the container image.
//
//   sluice-fake-ads --port=18001 --snapshot=FILE[,FILE...] [--version=1]
//                   [--tls_cert=PEM --tls_key=PEM [--tls_client_ca=PEM]]
//
// Each FILE holds one RateLimitConfig in protobuf text format. Listens on 127.0.0.1 only; with
// --tls_client_ca, a client must present a certificate that CA signed (mutual TLS, as Envoy
// Gateway's). Prints "serving on 127.0.0.1:PORT" once listening, then one line per request a
// client sends (node, version it holds, nonce it answers, NACK detail). Runs until SIGTERM or
// SIGINT. Test tooling: exits 1 with a message naming the flag on bad input.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/security/server_credentials.h"
#include "server/common/flag_file.h"
#include "tests/support/fake_ads_server.h"

ABSL_FLAG(int32_t, port, 18001, "port to listen on, on 127.0.0.1 (0: a free one)");
ABSL_FLAG(std::string, snapshot, "",
          "comma-separated files, each one RateLimitConfig in protobuf text format");
ABSL_FLAG(std::string, version, "1", "version_info of the snapshot");
ABSL_FLAG(std::string, tls_cert, "", "TLS: the server's certificate chain (PEM); empty: plaintext");
ABSL_FLAG(std::string, tls_key, "", "TLS: the private key of --tls_cert (PEM)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "mutual TLS: clients must present a certificate this PEM bundle signed");

namespace {

namespace rls = ::ratelimit::config::ratelimit::v3;

std::atomic<bool> stop_requested{false};

void RequestStop(int) { stop_requested.store(true); }

absl::StatusOr<std::vector<rls::RateLimitConfig>> ReadSnapshot() {
  const std::string files = absl::GetFlag(FLAGS_snapshot);
  if (files.empty()) {
    return absl::InvalidArgumentError("--snapshot: give at least one file");
  }
  std::vector<rls::RateLimitConfig> resources;
  for (absl::string_view file : absl::StrSplit(files, ',', absl::SkipEmpty())) {
    absl::StatusOr<std::string> text = sluice::ReadFlagFile("snapshot", std::string(file));
    if (!text.ok()) {
      return text.status();
    }
    // The parser prints what is wrong, with line and column, to stderr.
    if (!google::protobuf::TextFormat::ParseFromString(*text, &resources.emplace_back())) {
      return absl::InvalidArgumentError(
          absl::StrCat("--snapshot=", file, ": not a RateLimitConfig in protobuf text format"));
    }
  }
  return resources;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  const std::string client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (cert.empty()) {
    if (!client_ca.empty()) {
      return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
    }
    return nullptr;  // plaintext
  }
  absl::StatusOr<std::string> chain = sluice::ReadFlagFile("tls_cert", cert);
  absl::StatusOr<std::string> private_key = sluice::ReadFlagFile("tls_key", key);
  for (const auto* read : {&chain, &private_key}) {
    if (!read->ok()) {
      return read->status();
    }
  }
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*private_key, *chain});
  if (!client_ca.empty()) {
    absl::StatusOr<std::string> roots = sluice::ReadFlagFile("tls_client_ca", client_ca);
    if (!roots.ok()) {
      return roots.status();
    }
    options.pem_root_certs = *roots;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "sluice-fake-ads: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sluice-fake-ads --port=PORT --snapshot=FILE[,FILE...] [--version=V]\n"
      "                [--tls_cert=PEM --tls_key=PEM [--tls_client_ca=PEM]]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() > 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unexpected argument: ", args[1])));
  }
  absl::StatusOr<std::vector<rls::RateLimitConfig>> resources = ReadSnapshot();
  if (!resources.ok()) {
    return Fail(resources.status());
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials();
  if (!credentials.ok()) {
    return Fail(credentials.status());
  }
  const int port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--port=", port, ": not a port")));
  }
  absl::StatusOr<std::unique_ptr<sluice::testing::FakeAdsServer>> server =
      sluice::testing::FakeAdsServer::Start(port, *credentials);
  if (!server.ok()) {
    return Fail(server.status());
  }
  (*server)->Push(absl::GetFlag(FLAGS_version), *resources);
  signal(SIGTERM, RequestStop);
  signal(SIGINT, RequestStop);
  std::printf("serving on %s\n", (*server)->address().c_str());
  std::fflush(stdout);

  using Received = sluice::testing::FakeAdsServer::Received;
  size_t next = 0;
  while (!stop_requested.load()) {
    auto received =
        (*server)->WaitFor(next, [](const Received&) { return true; }, absl::Milliseconds(200));
    if (!received.has_value()) {
      continue;
    }
    next = received->first + 1;
    const auto& request = received->second.request;
    std::printf("stream %d: node %s, holds version \"%s\", answers nonce \"%s\"%s%s\n",
                received->second.stream, request.node().id().c_str(),
                request.version_info().c_str(), request.response_nonce().c_str(),
                request.has_error_detail() ? ", NACK: " : "",
                request.error_detail().message().c_str());
    std::fflush(stdout);
  }
  (*server)->Stop();
  return 0;
}
