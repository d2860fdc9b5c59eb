// gRPC over TLS and mutual TLS, with certificates made by openssl for each test, and their
// reload: a rotated server certificate is served to new connections without a restart.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;
using ::testing::HasSubstr;

constexpr char kConfig[] = "domain: tls\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                           "requests_per_unit: 100}\n";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class GrpcTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { config_ = dir_.WriteFile("tls.yaml", kConfig); }

  // Runs a shell command in the test directory; fails the test if it fails.
  void Shell(const std::string& command) {
    auto [code, output] = RunCommand(absl::StrCat("cd ", dir_.path(), " && (", command, ") 2>&1"));
    ASSERT_EQ(code, 0) << command << "\n" << output;
  }
  // A CA named `ca` (ca.crt, ca.key).
  void MakeCa(const std::string& ca) {
    Shell(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                       "-nodes -days 1 -subj /CN=",
                       ca, " -keyout ", ca, ".key -out ", ca, ".crt"));
  }
  // `name`.crt and `name`.key, signed by `ca`, valid for 127.0.0.1.
  void MakeCert(const std::string& name, const std::string& ca) {
    Shell(absl::StrCat(
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > ", name, ".ext && ",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=", name,
        " -keyout ", name, ".key -out ", name, ".csr && openssl x509 -req -days 1 -in ", name,
        ".csr -CA ", ca, ".crt -CAkey ", ca, ".key -CAcreateserial -extfile ", name,
        ".ext -out ", name, ".crt"));
  }
  std::string File(const std::string& name) { return absl::StrCat(dir_.path(), "/", name); }

  void Serve(std::vector<std::string> flags) {
    flags.push_back("--backend=memory");
    auto started = SluiceServer::Start(config_, flags, dir_.path());
    ASSERT_TRUE(started.ok()) << started.status();
    sluice_ = *std::move(started);
  }

  // One call over a fresh channel: "OK", or the error.
  std::string Call(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    RlsClient client(grpc::CreateChannel(sluice_->grpc_address(), credentials));
    auto request = BuildRequest("tls", {"k=v"}, 0);
    auto response = client.ShouldRateLimit(*request, absl::Seconds(3));
    return response.ok() ? "OK" : std::string(response.status().ToString());
  }
  std::shared_ptr<grpc::ChannelCredentials> Trusting(const std::string& ca,
                                                     const std::string& client_cert = "") {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = Read(File(ca + ".crt"));
    if (!client_cert.empty()) {
      options.pem_cert_chain = Read(File(client_cert + ".crt"));
      options.pem_private_key = Read(File(client_cert + ".key"));
    }
    return grpc::SslCredentials(options);
  }

  TempDir dir_;
  std::string config_;
  std::unique_ptr<SluiceServer> sluice_;
};

// Verifies TLS serves clients that trust the CA, and not plaintext ones.
TEST_F(GrpcTlsTest, ServesTls) {
  MakeCa("ca");
  MakeCert("server", "ca");
  Serve({"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key")});
  EXPECT_EQ(Call(Trusting("ca")), "OK");
  EXPECT_NE(Call(grpc::InsecureChannelCredentials()), "OK");
}

// Verifies mutual TLS: a client without a certificate, or with one another CA signed, is
// refused; one with a certificate of the client CA is served.
TEST_F(GrpcTlsTest, MutualTlsRequiresAClientCertificateOfTheCa) {
  MakeCa("ca");
  MakeCa("other");
  MakeCert("server", "ca");
  MakeCert("client", "ca");
  MakeCert("stranger", "other");
  Serve({"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key"),
         "--tls_client_ca=" + File("ca.crt")});
  EXPECT_EQ(Call(Trusting("ca", "client")), "OK");
  EXPECT_NE(Call(Trusting("ca")), "OK");
  EXPECT_NE(Call(Trusting("ca", "stranger")), "OK");
}

// Verifies a rotated certificate is served to new connections without a restart.
TEST_F(GrpcTlsTest, ReloadsARotatedCertificate) {
  MakeCa("ca");
  MakeCa("next");
  MakeCert("server", "ca");
  MakeCert("rotated", "next");
  Serve({"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key"),
         "--tls_reload_interval=1s"});
  ASSERT_EQ(Call(Trusting("ca")), "OK");
  Shell("cp rotated.key server.key.new && cp rotated.crt server.crt.new && "
        "mv server.key.new server.key && mv server.crt.new server.crt");
  std::string answer;
  for (int i = 0; i < 50 && answer != "OK"; ++i) {
    absl::SleepFor(absl::Milliseconds(200));
    answer = Call(Trusting("next"));
  }
  EXPECT_EQ(answer, "OK");
  EXPECT_NE(Call(Trusting("ca")), "OK");
}

// Verifies bad TLS settings stop sluice at start with a message naming the flag.
TEST_F(GrpcTlsTest, BadSettingsAreRefusedAtStart) {
  const std::string sluice = SluiceServer::BinaryPath("sluice");
  auto [code, output] = RunCommand(absl::StrCat(sluice, " --config=", config_,
                                                " --grpc_address=127.0.0.1:0 --http_address=127.0.0.1:0"
                                                " --tls_cert=", File("missing.crt"),
                                                " --tls_key=", File("missing.key"), " 2>&1"));
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("--tls_cert: cannot read"));
  auto [code2, output2] = RunCommand(absl::StrCat(sluice, " --config=", config_,
                                                  " --grpc_address=127.0.0.1:0 "
                                                  "--http_address=127.0.0.1:0 --tls_cert=x 2>&1"));
  EXPECT_NE(code2, 0);
  EXPECT_THAT(output2, HasSubstr("--tls_cert and --tls_key go together"));
}

}  // namespace
}  // namespace sluice
