// The credentials Sluice's gRPC listener serves with: plaintext, TLS, or mutual TLS. With TLS,
// the certificate, key and client CA files are watched and re-read every
// `reload_interval_seconds`, so a rotated certificate (e.g. a cert-manager Secret update) is
// served to new connections without a restart.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/string_ref.h"
#include "grpcpp/security/server_credentials.h"

namespace sluice {

struct GrpcTlsSettings {
  std::string cert_file;       // PEM certificate chain; empty: plaintext
  std::string key_file;        // PEM private key of the certificate
  std::string client_ca_file;  // PEM CA bundle; not empty: clients must present a cert it signed
  // With client_ca_file: a name the client certificate's subject alternative names must hold
  // (ClientCertificateHoldsName). Empty: any.
  std::string client_san;
  int reload_interval_seconds = 10;
};

// Whether a certificate with these subject alternative names answers to `name`: an IP
// address matches an IP SAN equal to it; a DNS name matches a DNS SAN equal to it ignoring
// case, or a wildcard SAN "*.rest" whose "*" stands for its whole first label.
bool ClientCertificateHoldsName(absl::string_view name,
                                const std::vector<grpc::string_ref>& dns_names,
                                const std::vector<grpc::string_ref>& ip_names);

// Plaintext credentials when `settings.cert_file` is empty, TLS ones otherwise. Checks the files
// first: kInvalidArgument naming the flag and the file when one is given without the other, or
// a file cannot be read or holds no PEM block.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const GrpcTlsSettings& settings);

}  // namespace sluice
