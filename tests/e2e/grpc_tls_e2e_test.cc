// gRPC over TLS and mutual TLS, with certificates made by openssl for each test, and their
// reload: a rotated server certificate is served to new connections without a restart.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rls_client.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/certificates.h"
#include "tests/support/process.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using testing::ReadWholeFile;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;
using ::testing::HasSubstr;

constexpr char kConfig[] = "domain: tls\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                           "requests_per_unit: 100}\n";

class GrpcTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { config_ = dir_.WriteFile("tls.yaml", kConfig); }

  // A CA named `ca` (ca.crt, ca.key).
  void MakeCa(const std::string& ca) { ASSERT_TRUE(testing::MakeCa(dir_.path(), ca).ok()); }
  // `name`.crt and `name`.key, signed by `ca`, valid for 127.0.0.1.
  void MakeCert(const std::string& name, const std::string& ca) {
    absl::Status made = testing::MakeCert(dir_.path(), name, ca);
    ASSERT_TRUE(made.ok()) << made;
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
    options.pem_root_certs = ReadWholeFile(File(ca + ".crt"));
    if (!client_cert.empty()) {
      options.pem_cert_chain = ReadWholeFile(File(client_cert + ".crt"));
      options.pem_private_key = ReadWholeFile(File(client_cert + ".key"));
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

// Verifies --tls_client_san (upstream's GRPC_CLIENT_TLS_SAN): of two clients with
// certificates of the client CA, only the one whose certificate holds the name is served.
TEST_F(GrpcTlsTest, MutualTlsChecksTheClientCertificatesName) {
  MakeCa("ca");
  MakeCa("clients");
  MakeCert("server", "ca");
  ASSERT_TRUE(testing::MakeCert(dir_.path(), "gateway", "clients", "envoy.gateway.local").ok());
  MakeCert("other", "clients");
  Serve({"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key"),
         "--tls_client_ca=" + File("clients.crt"), "--tls_client_san=envoy.gateway.local"});
  EXPECT_EQ(Call(Trusting("ca", "gateway")), "OK");
  EXPECT_NE(Call(Trusting("ca", "other")), "OK");
}

// Verifies sluicectl speaks TLS and mutual TLS (--tls_ca, --tls_cert, --tls_key): with the CA and
// a client certificate it gets a decision; without the certificate, or in plaintext, it is
// refused (exit 1); bad TLS flags are reported by name before any call.
TEST_F(GrpcTlsTest, SluicectlSpeaksMutualTls) {
  MakeCa("ca");
  MakeCert("server", "ca");
  MakeCert("client", "ca");
  Serve({"--tls_cert=" + File("server.crt"), "--tls_key=" + File("server.key"),
         "--tls_client_ca=" + File("ca.crt")});
  const std::string ctl = absl::StrCat(SluiceServer::BinaryPath("sluicectl"),
                                       " --server=", sluice_->grpc_address(), " --timeout=3s");
  const std::string check = " check tls k=v 2>&1";
  auto [code, output] = RunCommand(absl::StrCat(ctl, " --tls_ca=", File("ca.crt"), " --tls_cert=",
                                                File("client.crt"), " --tls_key=",
                                                File("client.key"), check));
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("overall: OK"));
  EXPECT_EQ(RunCommand(absl::StrCat(ctl, " --tls_ca=", File("ca.crt"), check)).first, 1);
  EXPECT_EQ(RunCommand(absl::StrCat(ctl, check)).first, 1);

  auto [missing_code, missing] =
      RunCommand(absl::StrCat(ctl, " --tls_ca=", File("missing.crt"), check));
  EXPECT_EQ(missing_code, 1);
  EXPECT_THAT(missing, HasSubstr("--tls_ca=" + File("missing.crt") + ": cannot read it"));
  auto [half_code, half] = RunCommand(absl::StrCat(ctl, " --tls_ca=", File("ca.crt"),
                                                   " --tls_cert=", File("client.crt"), check));
  EXPECT_EQ(half_code, 1);
  EXPECT_THAT(half, HasSubstr("--tls_cert and --tls_key go together"));
  auto [no_ca_code, no_ca] = RunCommand(absl::StrCat(ctl, " --tls_cert=", File("client.crt"),
                                                     " --tls_key=", File("client.key"), check));
  EXPECT_EQ(no_ca_code, 1);
  EXPECT_THAT(no_ca, HasSubstr("--tls_cert needs --tls_ca"));
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
  auto [code, output] = RunCommand(absl::StrCat(
      "cd ", dir_.path(), " && cp rotated.key server.key.new && cp rotated.crt server.crt.new && "
      "mv server.key.new server.key && mv server.crt.new server.crt 2>&1"));
  ASSERT_EQ(code, 0) << output;
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
