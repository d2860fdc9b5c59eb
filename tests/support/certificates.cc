#include "tests/support/certificates.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "tests/support/process.h"

namespace sluice::testing {
namespace {

absl::Status Shell(const std::string& dir, const std::string& command) {
  auto [code, output] = RunCommand(absl::StrCat("cd ", dir, " && (", command, ") 2>&1"));
  if (code != 0) {
    return absl::InternalError(absl::StrCat(command, " failed:\n", output));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeCa(const std::string& dir, const std::string& ca) {
  return Shell(dir, absl::StrCat("openssl req -x509 -newkey ec -pkeyopt "
                                 "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=",
                                 ca, " -keyout ", ca, ".key -out ", ca, ".crt"));
}

absl::Status MakeCert(const std::string& dir, const std::string& name, const std::string& ca,
                      const std::string& extra_dns) {
  const std::string names = absl::StrCat("IP:127.0.0.1,DNS:localhost",
                                         extra_dns.empty() ? "" : ",DNS:", extra_dns);
  return Shell(dir, absl::StrCat(
                        "printf 'subjectAltName=", names, "\\n' > ", name, ".ext && ",
                        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                        "-subj /CN=",
                        name, " -keyout ", name, ".key -out ", name,
                        ".csr && openssl x509 -req -days 1 -in ", name, ".csr -CA ", ca,
                        ".crt -CAkey ", ca, ".key -CAcreateserial -extfile ", name,
                        ".ext -out ", name, ".crt"));
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace sluice::testing
