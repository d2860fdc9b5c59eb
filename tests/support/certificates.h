// Test certificates made with openssl in a directory: a CA, and certificates it signs for
// 127.0.0.1 and localhost, for the TLS tests (gRPC server, xDS client).
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
// The whole content of `path` ("" when it cannot be read).
std::string ReadWholeFile(const std::string& path);

}  // namespace sluice::testing
