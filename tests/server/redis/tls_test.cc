// RedisClient over TLS against real redis-server processes serving TLS: verified connections,
// mutual TLS, the refusals a user must be able to tell apart (wrong CA, expired certificate,
// wrong name, no client certificate), and a rotated client certificate used by the next
// connection.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/clock.h"
#include "server/common/failure_reason.h"
#include "server/redis/redis_client.h"
#include "server/redis/tls_context.h"
#include "tests/support/certificates.h"
#include "tests/support/notification.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/unshared_status.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::RedisServer;
using testing::RedisServerOptions;
using testing::RedisServerTlsOptions;

// One CA ("ca") with a server certificate for 127.0.0.1/localhost, a client certificate and an
// expired server certificate; a second CA ("other") with a server certificate of its own.
class RedisTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string& d = dir_->path();
    ASSERT_TRUE(testing::MakeCa(d, "ca").ok());
    ASSERT_TRUE(testing::MakeCert(d, "server", "ca").ok());
    ASSERT_TRUE(testing::MakeClientCert(d, "client", "ca").ok());
    ASSERT_TRUE(testing::MakeClientCert(d, "client2", "ca").ok());
    ASSERT_TRUE(testing::MakeExpiredCert(d, "expired", "ca").ok());
    ASSERT_TRUE(testing::MakeCa(d, "other").ok());
    ASSERT_TRUE(testing::MakeCert(d, "other_server", "other").ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string File(const std::string& name) { return dir_->path() + "/" + name; }

  std::unique_ptr<RedisServer> StartServer(
      const std::string& cert,
      RedisServerTlsOptions::ClientAuth auth = RedisServerTlsOptions::ClientAuth::kNo) {
    RedisServerOptions options;
    options.tls.enabled = true;
    options.tls.cert_file = File(cert + ".crt");
    options.tls.key_file = File(cert + ".key");
    options.tls.ca_file = File("ca.crt");
    options.tls.client_auth = auth;
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static RedisTlsOptions Tls(const std::string& ca = "ca") {
    RedisTlsOptions tls;
    tls.enabled = true;
    tls.ca_file = File(ca + ".crt");
    return tls;
  }

  std::unique_ptr<RedisClient> NewClient(const std::string& address, RedisTlsOptions tls) {
    RedisClientOptions options;
    options.address = address;
    options.tls = std::move(tls);
    options.backoff_min = absl::Milliseconds(20);
    options.backoff_max = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<RedisClient>> client =
        RedisClient::Create(std::move(options), RealClock::Get());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Runs `args` through `client` with a one-second deadline.
  static absl::StatusOr<RedisReply> Run(RedisClient& client, std::vector<std::string> args) {
    CommandBatch batch;
    std::vector<std::string_view> views(args.begin(), args.end());
    batch.Add(absl::MakeConstSpan(views));
    testing::Notification done;
    absl::Status status;
    RedisReply reply;
    client.Execute(std::move(batch), RealClock::Get().MonotonicMicros() + 1000000,
                   [&](absl::Status s, absl::Span<RedisReply> replies) {
                     status = testing::UnsharedCopy(s);
                     if (s.ok()) {
                       reply = replies[0];
                     }
                     done.Notify();
                   });
    done.WaitForNotification();
    if (!status.ok()) {
      return status;
    }
    return reply;
  }

  // Waits until the client has failed a TLS handshake, and returns what a batch then meets.
  static absl::Status RefusedStatus(RedisClient& client) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (client.stats().totals.tls_failures == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_GT(client.stats().totals.tls_failures, 0u);
    EXPECT_EQ(client.ready_connections(), 0);
    absl::StatusOr<RedisReply> reply = Run(client, {"PING"});
    EXPECT_FALSE(reply.ok());
    return reply.status();
  }

  static testing::TempDir* dir_;
};

testing::TempDir* RedisTlsTest::dir_ = nullptr;

TEST_F(RedisTlsTest, VerifiedConnectionRunsCommandsAndScripts) {
  std::unique_ptr<RedisServer> server = StartServer("server");
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client = NewClient(server->tls_address(), Tls());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(10)));
  absl::StatusOr<RedisReply> set = Run(*client, {"SET", "k", "over-tls"});
  ASSERT_TRUE(set.ok()) << set.status();
  // Seen from the plain port: the write went to this server, over TLS.
  EXPECT_EQ(*server->Command({"GET", "k"}), "over-tls");
  absl::StatusOr<const RedisScript*> script =
      client->RegisterScript("echo", "return ARGV[1] .. '!'");
  ASSERT_TRUE(script.ok());
  CommandBatch batch;
  batch.AddEvalSha(**script, {}, {"hi"});
  testing::Notification done;
  std::string echoed;
  client->Execute(std::move(batch), RealClock::Get().MonotonicMicros() + 1000000,
                  [&](absl::Status s, absl::Span<RedisReply> replies) {
                    if (s.ok()) {
                      echoed = replies[0].str();
                    }
                    done.Notify();
                  });
  done.WaitForNotification();
  EXPECT_EQ(echoed, "hi!");
  // The connection was made once, and never refused.
  EXPECT_EQ(client->stats().totals.tls_failures, 0u);
}

TEST_F(RedisTlsTest, LargeRepliesAndPipelinesCrossTlsRecords) {
  std::unique_ptr<RedisServer> server = StartServer("server");
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client = NewClient(server->tls_address(), Tls());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(10)));
  // 300 KB: many TLS records each way, more than one read's chunk.
  const std::string big(300 * 1024, 'x');
  ASSERT_TRUE(Run(*client, {"SET", "big", big}).ok());
  absl::StatusOr<RedisReply> got = Run(*client, {"GET", "big"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->str(), big);
  // Many small commands in one batch come back in order.
  CommandBatch batch;
  for (int i = 0; i < 500; ++i) {
    std::string n = absl::StrCat(i);
    batch.Add({"INCRBY", "counter", n});
  }
  testing::Notification done;
  std::vector<int64_t> values;
  client->Execute(std::move(batch), RealClock::Get().MonotonicMicros() + 2000000,
                  [&](absl::Status s, absl::Span<RedisReply> replies) {
                    for (const RedisReply& r : replies) {
                      values.push_back(r.integer());
                    }
                    done.Notify();
                  });
  done.WaitForNotification();
  ASSERT_EQ(values.size(), 500u);
  int64_t sum = 0;
  for (int i = 0; i < 500; ++i) {
    sum += i;
    EXPECT_EQ(values[static_cast<size_t>(i)], sum);
  }
}

TEST_F(RedisTlsTest, MutualTlsNeedsTheClientCertificate) {
  std::unique_ptr<RedisServer> server =
      StartServer("server", RedisServerTlsOptions::ClientAuth::kYes);
  ASSERT_NE(server, nullptr);
  RedisTlsOptions with_cert = Tls();
  with_cert.cert_file = File("client.crt");
  with_cert.key_file = File("client.key");
  std::unique_ptr<RedisClient> good = NewClient(server->tls_address(), with_cert);
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(good->WaitUntilReady(absl::Seconds(10)));
  EXPECT_TRUE(Run(*good, {"PING"}).ok());

  // Without one, the server refuses (under TLS 1.3 after the handshake, with an alert): the
  // failure is TLS', with its own reason.
  std::unique_ptr<RedisClient> bad = NewClient(server->tls_address(), Tls());
  ASSERT_NE(bad, nullptr);
  absl::Status refused = RefusedStatus(*bad);
  EXPECT_EQ(FailureReasonOf(refused), FailureReason::kTls) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("certificate")) << refused;
}

TEST_F(RedisTlsTest, WrongCaIsRefusedWithTheCertificateCheckSaid) {
  std::unique_ptr<RedisServer> server = StartServer("other_server");
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client = NewClient(server->tls_address(), Tls("ca"));
  ASSERT_NE(client, nullptr);
  absl::Status refused = RefusedStatus(*client);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailureReasonOf(refused), FailureReason::kTls);
  EXPECT_THAT(refused.message(), HasSubstr("unable to get local issuer certificate")) << refused;
}

TEST_F(RedisTlsTest, ExpiredServerCertificateIsRefused) {
  std::unique_ptr<RedisServer> server = StartServer("expired");
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client = NewClient(server->tls_address(), Tls());
  ASSERT_NE(client, nullptr);
  absl::Status refused = RefusedStatus(*client);
  EXPECT_EQ(FailureReasonOf(refused), FailureReason::kTls);
  EXPECT_THAT(refused.message(), HasSubstr("certificate has expired")) << refused;
}

TEST_F(RedisTlsTest, ServerNameIsCheckedUnlessSkipped) {
  std::unique_ptr<RedisServer> server = StartServer("server");
  ASSERT_NE(server, nullptr);
  RedisTlsOptions wrong_name = Tls();
  wrong_name.server_name = "redis.example.com";  // not in the certificate
  std::unique_ptr<RedisClient> refused_client = NewClient(server->tls_address(), wrong_name);
  ASSERT_NE(refused_client, nullptr);
  absl::Status refused = RefusedStatus(*refused_client);
  EXPECT_THAT(refused.message(), HasSubstr("hostname mismatch")) << refused;

  // The name the certificate does carry, by name rather than by address.
  RedisTlsOptions right_name = Tls();
  right_name.server_name = "localhost";
  std::unique_ptr<RedisClient> named = NewClient(server->tls_address(), right_name);
  ASSERT_NE(named, nullptr);
  EXPECT_TRUE(named->WaitUntilReady(absl::Seconds(10)));

  // Skipping the name check still checks the chain.
  wrong_name.skip_hostname_verification = true;
  std::unique_ptr<RedisClient> skipped = NewClient(server->tls_address(), wrong_name);
  ASSERT_NE(skipped, nullptr);
  EXPECT_TRUE(skipped->WaitUntilReady(absl::Seconds(10)));
  std::unique_ptr<RedisServer> other = StartServer("other_server");
  ASSERT_NE(other, nullptr);
  std::unique_ptr<RedisClient> untrusted = NewClient(other->tls_address(), wrong_name);
  ASSERT_NE(untrusted, nullptr);
  EXPECT_EQ(FailureReasonOf(RefusedStatus(*untrusted)), FailureReason::kTls);
}

TEST_F(RedisTlsTest, PlainClientOnTheTlsPortFailsAsAConnectionNotAHang) {
  std::unique_ptr<RedisServer> server = StartServer("server");
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client = NewClient(server->tls_address(), RedisTlsOptions{});
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(client->WaitUntilReady(absl::Milliseconds(1500)));
  absl::StatusOr<RedisReply> reply = Run(*client, {"PING"});
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();
}

TEST_F(RedisTlsTest, ARotatedClientCertificateIsUsedByTheNextConnection) {
  // The client's files live where a secret mount would put them.
  testing::TempDir mount;
  const std::string cert = mount.path() + "/tls.crt";
  const std::string key = mount.path() + "/tls.key";
  ASSERT_EQ(testing::RunCommand(absl::StrCat("cp ", File("client.crt"), " ", cert, " && cp ",
                                             File("client.key"), " ", key))
                .first,
            0);
  std::unique_ptr<RedisServer> server =
      StartServer("server", RedisServerTlsOptions::ClientAuth::kYes);
  ASSERT_NE(server, nullptr);
  RedisTlsOptions tls = Tls();
  tls.cert_file = cert;
  tls.key_file = key;
  tls.reload_interval = absl::Milliseconds(10);
  absl::StatusOr<std::shared_ptr<TlsClientContext>> context = TlsClientContext::Create(tls);
  ASSERT_TRUE(context.ok()) << context.status();
  RedisClientOptions options;
  options.address = server->tls_address();
  options.tls = tls;
  options.backoff_min = absl::Milliseconds(20);
  options.backoff_max = absl::Milliseconds(100);
  RedisClientResources resources;
  resources.tls = *context;
  absl::StatusOr<std::unique_ptr<RedisClient>> client =
      RedisClient::Create(std::move(options), RealClock::Get(), std::move(resources));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->WaitUntilReady(absl::Seconds(10)));
  absl::StatusOr<std::string> first = server->Command({"CLIENT", "LIST"});
  ASSERT_TRUE(first.ok());

  // The secret is updated (a new certificate and key), then the connection drops.
  ASSERT_EQ(testing::RunCommand(absl::StrCat("cp ", File("client2.crt"), " ", cert, ".new && cp ",
                                             File("client2.key"), " ", key, ".new && mv ", key,
                                             ".new ", key, " && mv ", cert, ".new ", cert))
                .first,
            0);
  absl::SleepFor(absl::Milliseconds(30));
  ASSERT_TRUE(server->Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((*context)->reloads() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ((*context)->reloads(), 1);
  EXPECT_TRUE((*client)->WaitUntilReady(absl::Seconds(10)));
  EXPECT_TRUE(Run(**client, {"PING"}).ok());
}

TEST_F(RedisTlsTest, BadFilesFailTheStartNamingTheFile) {
  RedisTlsOptions missing_ca = Tls();
  missing_ca.ca_file = File("no-such-ca.crt");
  absl::StatusOr<std::shared_ptr<TlsClientContext>> context = TlsClientContext::Create(missing_ca);
  ASSERT_FALSE(context.ok());
  EXPECT_THAT(context.status().message(), HasSubstr("no-such-ca.crt"));

  RedisTlsOptions mismatched = Tls();
  mismatched.cert_file = File("client.crt");
  mismatched.key_file = File("client2.key");
  context = TlsClientContext::Create(mismatched);
  ASSERT_FALSE(context.ok());
  EXPECT_THAT(context.status().message(), HasSubstr("client2.key"));
  EXPECT_THAT(context.status().message(), HasSubstr("mismatch"));

  RedisClientOptions unix_tls;
  unix_tls.address = "unix:/tmp/redis.sock";
  unix_tls.tls = Tls();
  absl::StatusOr<std::unique_ptr<RedisClient>> client =
      RedisClient::Create(std::move(unix_tls), RealClock::Get());
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(), HasSubstr("TLS is for TCP"));
}

}  // namespace
}  // namespace sluice
