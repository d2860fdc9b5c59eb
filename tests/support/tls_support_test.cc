// Tests of the TLS test support itself (certificates.h, and the TLS of redis_server.h and
// redis_cluster.h), judged by tools that are not ours: the openssl and redis-cli command lines.
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/certificates.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ClientAuth = RedisServerTlsOptions::ClientAuth;

class TlsSupportTest : public ::testing::Test {
 protected:
  // One set of certificates for the binary: "ca" signs server, client, expired and rotated;
  // "other_ca" signs stranger, a client certificate the servers must not trust.
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string& dir = certs_->path();
    for (absl::Status status :
         {MakeCa(dir, "ca"), MakeCert(dir, "server", "ca"), MakeClientCert(dir, "client", "ca"),
          MakeExpiredCert(dir, "expired", "ca"), MakeCert(dir, "rotated", "ca"),
          MakeCa(dir, "other_ca"), MakeClientCert(dir, "stranger", "other_ca")}) {
      if (!status.ok()) {
        setup_error_ = new std::string(status.ToString());
        return;
      }
    }
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ(setup_error_, nullptr) << "certificates not made: " << *setup_error_;
  }

  static std::string Path(const std::string& file) { return certs_->path() + "/" + file; }

  static RedisServerTlsOptions Tls(ClientAuth client_auth, const std::string& cert = "server") {
    RedisServerTlsOptions tls;
    tls.enabled = true;
    tls.cert_file = Path(cert + ".crt");
    tls.key_file = Path(cert + ".key");
    tls.ca_file = Path("ca.crt");
    tls.client_auth = client_auth;
    return tls;
  }

  // Runs redis-cli over TLS, trusting "ca", against 127.0.0.1:`port`, presenting the client
  // certificate `client` unless it is empty; returns its exit status and output.
  static std::pair<int, std::string> RedisCliTls(int port, const std::string& client,
                                                 const std::string& args) {
    std::string command =
        absl::StrCat("redis-cli --tls --cacert ", Path("ca.crt"), " -h 127.0.0.1 -p ", port);
    if (!client.empty()) {
      absl::StrAppend(&command, " --cert ", Path(client + ".crt"), " --key ",
                      Path(client + ".key"));
    }
    return RunCommand(absl::StrCat(command, " ", args));
  }

  // The subject of the certificate the server on `port` presents in a handshake.
  static std::string ServedSubject(int port) {
    return RunCommand(absl::StrCat("openssl s_client -connect 127.0.0.1:", port, " -CAfile ",
                                   Path("ca.crt"),
                                   " </dev/null 2>/dev/null | openssl x509 -noout -subject"))
        .second;
  }

  static TempDir* certs_;
  static std::string* setup_error_;
};

TempDir* TlsSupportTest::certs_ = nullptr;
std::string* TlsSupportTest::setup_error_ = nullptr;

// The port of "host:port".
int PortOf(const std::string& address) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  return port;
}

// Verifies that the expired certificate is signed by the CA and names 127.0.0.1, and that only
// its dates are wrong: verification fails for expiry, and its end lies in the past.
TEST_F(TlsSupportTest, ExpiredCertificateIsExpiredAndNothingElse) {
  auto [verify_code, verify] = RunCommand(absl::StrCat(
      "openssl verify -CAfile ", Path("ca.crt"), " -verify_ip 127.0.0.1 ", Path("expired.crt")));
  EXPECT_NE(verify_code, 0);
  EXPECT_THAT(verify, HasSubstr("certificate has expired"));
  EXPECT_THAT(verify, Not(HasSubstr("unable to get local issuer")));
  auto [checkend_code, checkend] =
      RunCommand(absl::StrCat("openssl x509 -checkend 0 -noout -in ", Path("expired.crt")));
  EXPECT_NE(checkend_code, 0) << checkend;
  EXPECT_THAT(
      RunCommand(absl::StrCat("openssl x509 -noout -enddate -in ", Path("expired.crt"))).second,
      HasSubstr("notAfter=Jan  2 00:00:00 2020 GMT"));
  // The same check passes for the fresh server certificate: the failure above is the dates'.
  EXPECT_EQ(RunCommand(absl::StrCat("openssl verify -CAfile ", Path("ca.crt"),
                                    " -verify_ip 127.0.0.1 ", Path("server.crt")))
                .first,
            0);
}

// Verifies that the client certificate is good for a client and not for a server.
TEST_F(TlsSupportTest, ClientCertificateIsForClientsOnly) {
  const std::string verify = absl::StrCat("openssl verify -CAfile ", Path("ca.crt"), " -purpose ");
  EXPECT_EQ(RunCommand(absl::StrCat(verify, "sslclient ", Path("client.crt"))).first, 0);
  EXPECT_NE(RunCommand(absl::StrCat(verify, "sslserver ", Path("client.crt"))).first, 0);
}

// Verifies that a TLS server answers on its TLS port over TLS, not in plain text there, and
// still in plain text on its plain port (Command).
TEST_F(TlsSupportTest, ServerAnswersOverTlsBesideItsPlainPort) {
  RedisServerOptions options;
  options.tls = Tls(ClientAuth::kNo);
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  RedisServer& redis = **server;
  ASSERT_NE(redis.tls_port(), 0);
  EXPECT_NE(redis.tls_port(), redis.port());
  EXPECT_EQ(redis.tls_address(), absl::StrCat("127.0.0.1:", redis.tls_port()));

  auto [code, output] = RedisCliTls(redis.tls_port(), "", "PING");
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output, "PONG\n");
  EXPECT_THAT(RunCommand(absl::StrCat("redis-cli -p ", redis.tls_port(), " PING")).second,
              Not(HasSubstr("PONG")));
  EXPECT_EQ(redis.Command({"PING"}).value_or(""), "PONG");
  EXPECT_EQ(redis.Command({"CONFIG", "GET", "tls-auth-clients"}).value_or(""),
            "tls-auth-clients\nno");
}

// Verifies that tls-auth-clients yes drops a client without a certificate, with an expired one
// and with one of another CA, and serves one with a certificate of the CA (clientAuth only).
TEST_F(TlsSupportTest, AuthClientsYesRequiresAValidClientCertificate) {
  RedisServerOptions options;
  options.tls = Tls(ClientAuth::kYes);
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->tls_port();

  for (const char* refused : {"", "expired", "stranger"}) {
    auto [code, output] = RedisCliTls(port, refused, "PING");
    EXPECT_NE(code, 0) << "client certificate '" << refused << "': " << output;
    EXPECT_THAT(output, Not(HasSubstr("PONG"))) << "client certificate '" << refused << "'";
  }
  auto [code, output] = RedisCliTls(port, "client", "PING");
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output, "PONG\n");
}

// Verifies that tls-auth-clients optional serves a client without a certificate and still
// checks one that is presented.
TEST_F(TlsSupportTest, AuthClientsOptionalChecksOnlyPresentedCertificates) {
  RedisServerOptions options;
  options.tls = Tls(ClientAuth::kOptional);
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->tls_port();

  EXPECT_EQ(RedisCliTls(port, "", "PING").second, "PONG\n");
  EXPECT_EQ(RedisCliTls(port, "client", "PING").second, "PONG\n");
  EXPECT_NE(RedisCliTls(port, "expired", "PING").first, 0);
}

// Verifies that a server presenting the expired certificate is refused by a verifying client,
// and that verification is the only reason (--insecure gets through).
TEST_F(TlsSupportTest, ExpiredServerCertificateIsRefusedByClients) {
  RedisServerOptions options;
  options.tls = Tls(ClientAuth::kNo, "expired");
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->tls_port();

  auto [code, output] = RedisCliTls(port, "", "PING");
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("certificate verify failed"));
  EXPECT_EQ(RedisCliTls(port, "", "--insecure PING").second, "PONG\n");
}

// Verifies that a TLS-only server has no plain TCP port, that Command() still works (through
// its unix socket), and that Restart brings it back on the same TLS port.
TEST_F(TlsSupportTest, TlsOnlyServerKeepsCommandAndItsPortAcrossRestart) {
  RedisServerOptions options;
  options.tls = Tls(ClientAuth::kNo);
  options.tls.plain_port = false;
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  RedisServer& redis = **server;
  EXPECT_EQ(redis.port(), 0);
  EXPECT_EQ(redis.Command({"CONFIG", "GET", "port"}).value_or(""), "port\n0");
  ASSERT_TRUE(redis.Command({"SET", "k", "v"}).ok());
  EXPECT_EQ(RedisCliTls(redis.tls_port(), "", "GET k").second, "v\n");

  const int tls_port = redis.tls_port();
  ASSERT_TRUE(redis.Restart().ok());
  EXPECT_EQ(redis.tls_port(), tls_port);
  EXPECT_EQ(RedisCliTls(tls_port, "", "PING").second, "PONG\n");
  EXPECT_EQ(redis.Command({"PING"}).value_or(""), "PONG");
}

// Verifies that Restart keeps both the plain and the TLS port.
TEST_F(TlsSupportTest, RestartKeepsBothPorts) {
  RedisServerOptions options;
  options.tls = Tls(ClientAuth::kNo);
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  RedisServer& redis = **server;
  const int port = redis.port();
  const int tls_port = redis.tls_port();
  (*server)->Kill();
  ASSERT_TRUE(redis.Restart().ok());
  EXPECT_EQ(redis.port(), port);
  EXPECT_EQ(redis.tls_port(), tls_port);
  EXPECT_EQ(RedisCliTls(tls_port, "", "PING").second, "PONG\n");
  EXPECT_EQ(redis.Command({"PING"}).value_or(""), "PONG");
}

// Verifies certificate rotation: new content at the same paths is served after
// ReloadCertificate (not before), a pair Redis cannot load is refused with the old one kept,
// and Restart serves the last one reloaded.
TEST_F(TlsSupportTest, ReloadCertificateServesTheNewOne) {
  TempDir dir;
  const std::string cert = dir.WriteFile("live.crt", ReadWholeFile(Path("server.crt")));
  const std::string key = dir.WriteFile("live.key", ReadWholeFile(Path("server.key")));
  RedisServerOptions options;
  options.tls = Tls(ClientAuth::kNo);
  options.tls.cert_file = cert;
  options.tls.key_file = key;
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  RedisServer& redis = **server;
  const int port = redis.tls_port();
  EXPECT_THAT(ServedSubject(port), HasSubstr("CN = server"));

  dir.WriteFile("live.crt", ReadWholeFile(Path("rotated.crt")));
  dir.WriteFile("live.key", ReadWholeFile(Path("rotated.key")));
  EXPECT_THAT(ServedSubject(port), HasSubstr("CN = server"));  // Redis keeps what it read.
  ASSERT_TRUE(redis.ReloadCertificate(cert, key).ok());
  EXPECT_THAT(ServedSubject(port), HasSubstr("CN = rotated"));

  absl::Status mismatched = redis.ReloadCertificate(Path("server.crt"), Path("client.key"));
  EXPECT_FALSE(mismatched.ok());
  EXPECT_THAT(ServedSubject(port), HasSubstr("CN = rotated"));

  ASSERT_TRUE(redis.ReloadCertificate(Path("expired.crt"), Path("expired.key")).ok());
  ASSERT_TRUE(redis.Restart().ok());
  EXPECT_THAT(ServedSubject(port), HasSubstr("CN = expired"));
}

// Verifies that a TLS cluster (client certificates required, bus and replication over TLS)
// comes up healthy, that its nodes tell TLS clients the TLS ports and plain clients the plain
// ones (CLUSTER SLOTS, MOVED, ASK), that replicas sync over TLS, and that slot migration works.
TEST_F(TlsSupportTest, TlsClusterComesUpHealthyAndAdvertisesPortsByConnectionKind) {
  RedisClusterOptions options;
  options.tls = Tls(ClientAuth::kYes);
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<RedisCluster>> started = RedisCluster::Start(options);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  ASSERT_TRUE(started.ok()) << started.status();
  std::printf("TLS cluster (3 masters, 3 replicas) healthy after %lld ms\n",
              static_cast<long long>(took.count()));
  RedisCluster& cluster = **started;
  ASSERT_EQ(cluster.TlsSeedAddresses().size(), cluster.size());

  std::set<int> plain_ports;
  std::set<int> tls_ports;
  for (const std::string& address : cluster.SeedAddresses()) {
    plain_ports.insert(PortOf(address));
    tls_ports.insert(PortOf(cluster.TlsAddressOf(address)));
    EXPECT_EQ(cluster.ServerAt(cluster.TlsAddressOf(address)), cluster.ServerAt(address));
    EXPECT_EQ(cluster.Command(address, {"CONFIG", "GET", "tls-cluster"}).value_or(""),
              "tls-cluster\nyes");
  }

  // CLUSTER SLOTS: every port in the answer is of the connection's kind.
  const std::string first = cluster.SeedAddresses()[0];
  // The ports in a CLUSTER SLOTS reply as text, where each node's port follows its IP.
  auto ports_in = [](const std::string& slots) {
    std::multiset<int> ports;
    std::vector<std::string> lines = absl::StrSplit(slots, '\n');
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      int port = 0;
      if (lines[i] == "127.0.0.1" && absl::SimpleAtoi(lines[i + 1], &port)) {
        ports.insert(port);
      }
    }
    return ports;
  };
  // Every port listed is of the kind wanted, and every master is listed. (A replica is listed
  // only once the other nodes have heard of its replication offset, a moment after healthy.)
  absl::StatusOr<std::vector<std::string>> masters = cluster.Masters();
  ASSERT_TRUE(masters.ok()) << masters.status();
  auto all_of_kind = [&](const std::multiset<int>& found, const std::set<int>& ports, bool tls) {
    for (int port : found) {
      if (ports.count(port) == 0) {
        return false;
      }
    }
    for (const std::string& master : *masters) {
      if (found.count(PortOf(tls ? cluster.TlsAddressOf(master) : master)) != 1) {
        return false;
      }
    }
    return true;
  };
  auto [code, tls_slots] =
      RedisCliTls(PortOf(cluster.TlsAddressOf(first)), "client", "CLUSTER SLOTS");
  ASSERT_EQ(code, 0) << tls_slots;
  EXPECT_TRUE(all_of_kind(ports_in(tls_slots), tls_ports, true)) << tls_slots;
  absl::StatusOr<std::string> plain_slots = cluster.Command(first, {"CLUSTER", "SLOTS"});
  ASSERT_TRUE(plain_slots.ok()) << plain_slots.status();
  EXPECT_TRUE(all_of_kind(ports_in(*plain_slots), plain_ports, false)) << *plain_slots;

  // MOVED: a key asked of a master that does not serve it.
  absl::StatusOr<int> slot = cluster.KeySlot("tls-key");
  ASSERT_TRUE(slot.ok()) << slot.status();
  absl::StatusOr<std::string> owner = cluster.MasterForSlot(*slot);
  ASSERT_TRUE(owner.ok()) << owner.status();
  std::string other = (*masters)[0] == *owner ? (*masters)[1] : (*masters)[0];
  EXPECT_EQ(RedisCliTls(PortOf(cluster.TlsAddressOf(other)), "client", "GET tls-key").second,
            absl::StrCat("MOVED ", *slot, " ", cluster.TlsAddressOf(*owner), "\n\n"));
  absl::StatusOr<std::string> plain_moved = cluster.Command(other, {"GET", "tls-key"});
  EXPECT_EQ(plain_moved.status().message(), absl::StrCat("MOVED ", *slot, " ", *owner));

  // Replication over TLS: each replica's master_port is its master's TLS port.
  for (const std::string& address : cluster.SeedAddresses()) {
    absl::StatusOr<std::string> info = cluster.Command(address, {"INFO", "replication"});
    ASSERT_TRUE(info.ok()) << info.status();
    if (absl::StrContains(*info, "role:slave")) {
      EXPECT_THAT(*info, HasSubstr("master_link_status:up"));
      size_t at = info->find("master_port:");
      ASSERT_NE(at, std::string::npos);
      int master_port = 0;
      ASSERT_TRUE(absl::SimpleAtoi(
          absl::StripAsciiWhitespace(info->substr(at + 12, info->find('\n', at) - at - 12)),
          &master_port));
      EXPECT_EQ(tls_ports.count(master_port), 1u) << *info;
    }
  }

  // Migration: ASK for a missing key mid-migration, then MIGRATE (over TLS) and MOVED.
  ASSERT_TRUE(cluster.Command(*owner, {"SET", "tls-key", "v"}).ok());
  absl::Status begun = cluster.BeginSlotMigration(*slot, other);
  ASSERT_TRUE(begun.ok()) << begun;
  EXPECT_EQ(
      RedisCliTls(PortOf(cluster.TlsAddressOf(*owner)), "client", "GET {tls-key}.missing").second,
      absl::StrCat("ASK ", *slot, " ", cluster.TlsAddressOf(other), "\n\n"));
  absl::Status migrated = cluster.MigrateSlotKeys(*slot, other);
  ASSERT_TRUE(migrated.ok()) << migrated;
  absl::Status finished = cluster.FinishSlotMigration(*slot, other);
  ASSERT_TRUE(finished.ok()) << finished;
  EXPECT_EQ(cluster.Command(other, {"GET", "tls-key"}).value_or(""), "v");
  EXPECT_EQ(RedisCliTls(PortOf(cluster.TlsAddressOf(other)), "client", "GET tls-key").second,
            "v\n");
}

}  // namespace
}  // namespace sluice::testing
