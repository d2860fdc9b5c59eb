#include "server/service/grpc_tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace sluice {
namespace {

absl::Status CheckPemFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " holds no PEM block (-----BEGIN ...)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const GrpcTlsSettings& settings) {
  if (settings.cert_file.empty() != settings.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together: give both or neither");
  }
  if (settings.cert_file.empty()) {
    if (!settings.client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (settings.reload_interval_seconds < 1) {
    return absl::InvalidArgumentError("--tls_reload_interval must be at least 1s");
  }
  if (absl::Status s = CheckPemFile("tls_cert", settings.cert_file); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPemFile("tls_key", settings.key_file); !s.ok()) {
    return s;
  }
  const bool mutual = !settings.client_ca_file.empty();
  if (mutual) {
    if (absl::Status s = CheckPemFile("tls_client_ca", settings.client_ca_file); !s.ok()) {
      return s;
    }
  }
  const auto interval = static_cast<unsigned int>(settings.reload_interval_seconds);
  auto provider =
      mutual ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                   settings.key_file, settings.cert_file, settings.client_ca_file, interval)
             : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                   settings.key_file, settings.cert_file, interval);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace sluice
