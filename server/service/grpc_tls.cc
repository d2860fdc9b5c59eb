#include "server/service/grpc_tls.h"

#include <arpa/inet.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_verifier.h"
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

// An IP address as bytes (4 or 16), or "" when `text` is not one.
std::string IpBytes(absl::string_view text) {
  const std::string address(text);
  unsigned char bytes[16];
  if (inet_pton(AF_INET, address.c_str(), bytes) == 1) {
    return std::string(reinterpret_cast<char*>(bytes), 4);
  }
  if (inet_pton(AF_INET6, address.c_str(), bytes) == 1) {
    return std::string(reinterpret_cast<char*>(bytes), 16);
  }
  return "";
}

// Refuses a client whose certificate does not hold `name` (--tls_client_san); runs after the
// chain was verified against the client CA.
class ClientNameVerifier : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit ClientNameVerifier(std::string name) : name_(std::move(name)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)>, grpc::Status* sync_status) override {
    if (ClientCertificateHoldsName(name_, request->dns_names(), request->ip_names())) {
      *sync_status = grpc::Status::OK;
    } else {
      *sync_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                  absl::StrCat("client certificate does not hold the name ",
                                               name_, " (--tls_client_san)"));
    }
    return true;
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  const std::string name_;
};

}  // namespace

bool ClientCertificateHoldsName(absl::string_view name,
                                const std::vector<grpc::string_ref>& dns_names,
                                const std::vector<grpc::string_ref>& ip_names) {
  if (const std::string ip = IpBytes(name); !ip.empty()) {
    for (const grpc::string_ref& san : ip_names) {
      if (IpBytes(absl::string_view(san.data(), san.size())) == ip) {
        return true;
      }
    }
    return false;
  }
  for (const grpc::string_ref& ref : dns_names) {
    const absl::string_view san(ref.data(), ref.size());
    if (absl::EqualsIgnoreCase(san, name)) {
      return true;
    }
    // "*.example.com" answers for "a.example.com", not for "example.com" or "a.b.example.com".
    const size_t dot = name.find('.');
    if (absl::StartsWith(san, "*.") && dot != absl::string_view::npos && dot > 0 &&
        absl::EqualsIgnoreCase(san.substr(1), name.substr(dot))) {
      return true;
    }
  }
  return false;
}

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
    if (!settings.client_san.empty()) {
      options.set_certificate_verifier(
          grpc::experimental::ExternalCertificateVerifier::Create<ClientNameVerifier>(
              settings.client_san));
    }
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace sluice
