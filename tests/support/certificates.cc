#include "tests/support/certificates.h"

#include <filesystem>
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

// `dir`/`name`.crt and `name`.key: a new key, CN=`name`, signed by `ca` for a day with the
// X.509 extension line `extension`.
absl::Status MakeSigned(const std::string& dir, const std::string& name, const std::string& ca,
                        const std::string& extension) {
  return Shell(dir, absl::StrCat("printf '", extension, "\\n' > ", name, ".ext && ",
                                 "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                                 "-nodes -subj /CN=",
                                 name, " -keyout ", name, ".key -out ", name,
                                 ".csr && openssl x509 -req -days 1 -in ", name, ".csr -CA ", ca,
                                 ".crt -CAkey ", ca, ".key -CAcreateserial -extfile ", name,
                                 ".ext -out ", name, ".crt"));
}

}  // namespace

absl::Status MakeCa(const std::string& dir, const std::string& ca) {
  return Shell(dir, absl::StrCat("openssl req -x509 -newkey ec -pkeyopt "
                                 "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=",
                                 ca, " -keyout ", ca, ".key -out ", ca, ".crt"));
}

absl::Status MakeCert(const std::string& dir, const std::string& name, const std::string& ca,
                      const std::string& extra_dns) {
  const std::string names =
      absl::StrCat("IP:127.0.0.1,DNS:localhost", extra_dns.empty() ? "" : ",DNS:", extra_dns);
  return MakeSigned(dir, name, ca, absl::StrCat("subjectAltName=", names));
}

absl::Status MakeClientCert(const std::string& dir, const std::string& name,
                            const std::string& ca) {
  return MakeSigned(dir, name, ca, "extendedKeyUsage=clientAuth");
}

absl::Status MakeExpiredCert(const std::string& dir, const std::string& name,
                             const std::string& ca) {
  // `openssl ca` wants a configuration naming its CA files, a database of what it issued and a
  // serial number file; paths in it are relative to `dir`, where Shell runs.
  const std::string state = name + ".ca";
  std::error_code error;
  std::filesystem::create_directories(dir + "/" + state, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", dir, "/", state, ": ", error.message()));
  }
  const std::string config_path = absl::StrCat(dir, "/", state, "/openssl.cnf");
  std::ofstream config(config_path);
  config << absl::StrCat(
      "[ca]\n"
      "default_ca = signer\n"
      "[signer]\n"
      "certificate = ",
      ca, ".crt\n", "private_key = ", ca, ".key\n", "database = ", state, "/index.txt\n",
      "serial = ", state, "/serial\n", "new_certs_dir = ", state, "\n",
      "default_md = sha256\n"
      "policy = any_subject\n"
      "unique_subject = no\n"
      "copy_extensions = none\n"
      "[any_subject]\n"
      "commonName = supplied\n"
      "[names]\n"
      "subjectAltName = IP:127.0.0.1,DNS:localhost\n");
  config.close();
  if (!config) {
    return absl::InternalError(absl::StrCat("cannot write ", config_path));
  }
  return Shell(dir, absl::StrCat(": > ", state, "/index.txt && openssl rand -hex 8 > ", state,
                                 "/serial && openssl req -newkey ec -pkeyopt "
                                 "ec_paramgen_curve:prime256v1 -nodes -subj /CN=",
                                 name, " -keyout ", name, ".key -out ", name,
                                 ".csr && openssl ca -batch -notext -config ", state,
                                 "/openssl.cnf -extensions names -startdate 20200101000000Z "
                                 "-enddate 20200102000000Z -in ",
                                 name, ".csr -out ", name, ".crt"));
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace sluice::testing
