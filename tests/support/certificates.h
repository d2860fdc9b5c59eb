// Test certificates made with the openssl command line tool in a directory: a CA, and
// certificates it signs for 127.0.0.1 and localhost, for the TLS tests (gRPC server, xDS client,
// Redis over TLS): server certificates, client certificates for mutual TLS, and expired ones.
// Keys are P-256 and unencrypted. Calls that sign with the same CA must not run concurrently
// (they share its serial number file).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace sluice::testing {

// `dir`/`ca`.crt and `ca`.key: a self-signed CA named `ca`.
absl::Status MakeCa(const std::string& dir, const std::string& ca);
// `dir`/`name`.crt and `name`.key, signed by the CA `ca` of MakeCa, with the subject
// alternative names IP:127.0.0.1 and DNS:localhost, plus DNS:`extra_dns` when given.
absl::Status MakeCert(const std::string& dir, const std::string& name, const std::string& ca,
                      const std::string& extra_dns = "");
// `dir`/`name`.crt and `name`.key, signed by `ca`, for the client side of mutual TLS: subject
// CN=`name`, extendedKeyUsage clientAuth and no subject alternative names, as a CA that issues
// client certificates makes them (so it cannot serve as a server's certificate).
absl::Status MakeClientCert(const std::string& dir, const std::string& name, const std::string& ca);
// `dir`/`name`.crt and `name`.key, signed by `ca`, with MakeCert's names, but valid only from
// 2020-01-01 to 2020-01-02 UTC: whoever checks it finds the signature and names right and the
// certificate expired. (OpenSSL 3.0's `x509 -req` cannot date a certificate in the past, so it is
// signed with `openssl ca -startdate -enddate`, whose bookkeeping files go to `dir`/`name`.ca/.)
absl::Status MakeExpiredCert(const std::string& dir, const std::string& name,
                             const std::string& ca);
// The whole content of `path` ("" when it cannot be read).
std::string ReadWholeFile(const std::string& path);

}  // namespace sluice::testing
