// Tests of the Sentinel test support itself (redis_sentinel.h): the sentinels of a started
// deployment name its master, promote the replica when the master dies or on request, and take
// a restarted old master back as a replica; with TLS and with passwords. Under TLS the servers
// and sentinels are judged by a tool that is not ours, redis-cli --tls.
#include "tests/support/redis_sentinel.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/certificates.h"
#include "tests/support/process.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ClientAuth = RedisServerTlsOptions::ClientAuth;

constexpr std::chrono::milliseconds kFailoverTimeout{30000};
// The sentinels demote a restarted old master 8 to 20 s after it comes back; then it syncs.
constexpr std::chrono::milliseconds kRejoinTimeout{45000};

// Milliseconds since `start`, for the timings recorded in the test's XML output.
int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

class RedisSentinelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string& dir = certs_->path();
    for (absl::Status status :
         {MakeCa(dir, "ca"), MakeCert(dir, "server", "ca"), MakeClientCert(dir, "client", "ca")}) {
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

  // TLS everywhere, every TLS client (the processes' links to each other too) verified.
  static RedisServerTlsOptions Tls() {
    RedisServerTlsOptions tls;
    tls.enabled = true;
    tls.cert_file = Path("server.crt");
    tls.key_file = Path("server.key");
    tls.ca_file = Path("ca.crt");
    tls.client_auth = ClientAuth::kYes;
    return tls;
  }

  // Starts a deployment into deployment_ and records how long that took.
  void StartDeployment(RedisSentinelDeploymentOptions options = {}) {
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::unique_ptr<RedisSentinelDeployment>> deployment =
        RedisSentinelDeployment::Start(std::move(options));
    ASSERT_TRUE(deployment.ok()) << deployment.status();
    RecordProperty("start_ms", static_cast<int>(MsSince(start)));
    deployment_ = *std::move(deployment);
  }

  // Kills the master, waits for the failover and records how long that took.
  void KillMasterAndWait() {
    auto start = std::chrono::steady_clock::now();
    deployment_->KillMaster();
    absl::Status failover = deployment_->WaitForFailover(kFailoverTimeout);
    ASSERT_TRUE(failover.ok()) << failover;
    RecordProperty("failover_ms", static_cast<int>(MsSince(start)));
  }

  // redis-cli over TLS with the client certificate, trusting the CA, against `address`; its exit
  // status and output (one line per reply element).
  static std::pair<int, std::string> RedisCliTls(const std::string& address,
                                                 const std::string& args) {
    std::vector<std::string> host_port = absl::StrSplit(address, ':');
    return RunCommand(absl::StrCat("redis-cli --tls --cacert ", Path("ca.crt"), " --cert ",
                                   Path("client.crt"), " --key ", Path("client.key"), " -h ",
                                   host_port[0], " -p ", host_port[1], " ", args));
  }

  // Whether `key` holds `value` on `replica` within five seconds.
  static bool ReplicaReceives(RedisServer& replica, const std::string& key,
                              const std::string& value) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (replica.Command({"GET", key}).value_or("") != value) {
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  static TempDir* certs_;
  static std::string* setup_error_;
  std::unique_ptr<RedisSentinelDeployment> deployment_;
};

TempDir* RedisSentinelTest::certs_ = nullptr;
std::string* RedisSentinelTest::setup_error_ = nullptr;

// Verifies that every sentinel names the master, and that after the master is killed they all
// name the former replica, which is master and kept the data written before the crash.
TEST_F(RedisSentinelTest, SentinelsPromoteTheReplicaWhenTheMasterDies) {
  ASSERT_NO_FATAL_FAILURE(StartDeployment());
  RedisServer* first_master = deployment_->master();
  RedisServer* first_replica = deployment_->replica();
  ASSERT_EQ(deployment_->SentinelAddresses().size(), 3u);
  for (size_t i = 0; i < deployment_->sentinel_count(); ++i) {
    EXPECT_EQ(deployment_->SentinelAddresses()[i], deployment_->SentinelAddress(i));
    EXPECT_EQ(deployment_->MasterAddressAsSeenBy(i).value_or("?"), first_master->address());
  }
  EXPECT_THAT(first_replica->Command({"ROLE"}).value_or("?"), StartsWith("slave\n"));
  ASSERT_EQ(first_master->Command({"SET", "k", "before"}).value_or("?"), "OK");
  // (WAIT cannot tell: Command's connection is new, and WAIT counts the replicas that have the
  // writes of its own connection.)
  ASSERT_TRUE(ReplicaReceives(*first_replica, "k", "before"));

  ASSERT_NO_FATAL_FAILURE(KillMasterAndWait());

  EXPECT_FALSE(first_master->running());
  EXPECT_EQ(deployment_->master(), first_replica);
  EXPECT_EQ(deployment_->replica(), first_master);
  EXPECT_EQ(deployment_->MasterAddressAsSentinelsSee().value_or("?"), first_replica->address());
  EXPECT_THAT(first_replica->Command({"ROLE"}).value_or("?"), StartsWith("master\n"));
  EXPECT_EQ(first_replica->Command({"GET", "k"}).value_or("?"), "before");
  EXPECT_EQ(first_replica->Command({"SET", "k", "after"}).value_or("?"), "OK");
}

// Verifies that under TLS the sentinels serve TLS and name the master's TLS port, before and
// after a failover, as seen by redis-cli --tls; and that the servers' plain ports are not what
// the sentinels report.
TEST_F(RedisSentinelTest, SentinelsServeAndReportTlsAddressesUnderTls) {
  RedisSentinelDeploymentOptions options;
  options.tls = Tls();
  ASSERT_NO_FATAL_FAILURE(StartDeployment(options));
  RedisServer* first_master = deployment_->master();
  RedisServer* first_replica = deployment_->replica();
  ASSERT_NE(first_master->tls_port(), 0);
  EXPECT_EQ(deployment_->MonitoredAddress(*first_master), first_master->tls_address());
  std::vector<std::string> sentinels = deployment_->SentinelAddresses();
  ASSERT_EQ(sentinels.size(), 3u);
  const std::string ask =
      absl::StrCat("SENTINEL GET-MASTER-ADDR-BY-NAME ", deployment_->master_name());
  for (size_t i = 0; i < sentinels.size(); ++i) {
    EXPECT_EQ(sentinels[i], deployment_->SentinelTlsAddress(i));
    auto [status, output] = RedisCliTls(sentinels[i], ask);
    EXPECT_EQ(status, 0) << output;
    EXPECT_EQ(output, absl::StrCat("127.0.0.1\n", first_master->tls_port(), "\n"));
  }
  // The sentinels found each other and the replica through the TLS ports they announce.
  auto [status, others] =
      RedisCliTls(sentinels[0], absl::StrCat("SENTINEL SENTINELS ", deployment_->master_name()));
  EXPECT_EQ(status, 0) << others;
  EXPECT_THAT(others, HasSubstr(absl::StrCat("\n", deployment_->sentinel(1)->tls_port(), "\n")));
  EXPECT_THAT(others, HasSubstr(absl::StrCat("\n", deployment_->sentinel(2)->tls_port(), "\n")));
  EXPECT_THAT(deployment_->SentinelCommand(0, {"SENTINEL", "REPLICAS", deployment_->master_name()})
                  .value_or("?"),
              HasSubstr(absl::StrCat("\nport\n", first_replica->tls_port(), "\n")));

  ASSERT_NO_FATAL_FAILURE(KillMasterAndWait());

  for (const std::string& sentinel : sentinels) {
    auto [status, output] = RedisCliTls(sentinel, ask);
    EXPECT_EQ(status, 0) << output;
    EXPECT_EQ(output, absl::StrCat("127.0.0.1\n", first_replica->tls_port(), "\n"));
  }
  auto [role_status, role] = RedisCliTls(first_replica->tls_address(), "ROLE");
  EXPECT_EQ(role_status, 0) << role;
  EXPECT_THAT(role, StartsWith("master\n"));
}

// Verifies that with passwords the sentinels and servers refuse unauthenticated commands, and
// the sentinels still know each other and fail over (they authenticate to the servers with
// auth-pass and to each other with their own requirepass).
TEST_F(RedisSentinelTest, FailsOverWithMasterAndSentinelPasswords) {
  RedisSentinelDeploymentOptions options;
  options.master_password = "master-secret";
  options.sentinel_password = "sentinel-secret";
  ASSERT_NO_FATAL_FAILURE(StartDeployment(options));
  RedisServer* first_replica = deployment_->replica();
  auto [sentinel_status, sentinel_output] =
      RunCommand(absl::StrCat("redis-cli -p ", deployment_->sentinel(0)->port(),
                              " SENTINEL GET-MASTER-ADDR-BY-NAME ", deployment_->master_name()));
  EXPECT_THAT(sentinel_output, HasSubstr("NOAUTH"));
  auto [master_status, master_output] =
      RunCommand(absl::StrCat("redis-cli -p ", deployment_->master()->port(), " GET k"));
  EXPECT_THAT(master_output, HasSubstr("NOAUTH"));
  EXPECT_EQ(deployment_->MasterAddressAsSentinelsSee().value_or("?"),
            deployment_->master()->address());
  // Each sentinel is connected to the two others (it would be "disconnected" if they refused it).
  for (size_t i = 0; i < deployment_->sentinel_count(); ++i) {
    std::string others =
        deployment_->SentinelCommand(i, {"SENTINEL", "SENTINELS", deployment_->master_name()})
            .value_or("?");
    std::vector<std::string> pieces = absl::StrSplit(others, "\nflags\nsentinel\n");
    EXPECT_EQ(pieces.size(), 3u) << others;
  }

  ASSERT_NO_FATAL_FAILURE(KillMasterAndWait());

  EXPECT_EQ(deployment_->master(), first_replica);
  EXPECT_EQ(deployment_->MasterAddressAsSentinelsSee().value_or("?"), first_replica->address());
}

// Verifies that ForceFailover promotes the replica without killing the master, and that the
// sentinels then turn the old master into the new master's replica.
TEST_F(RedisSentinelTest, ForcedFailoverSwapsTheRoles) {
  ASSERT_NO_FATAL_FAILURE(StartDeployment());
  RedisServer* first_master = deployment_->master();
  RedisServer* first_replica = deployment_->replica();

  auto start = std::chrono::steady_clock::now();
  absl::Status failover = deployment_->ForceFailover(kFailoverTimeout);
  ASSERT_TRUE(failover.ok()) << failover;
  RecordProperty("forced_failover_ms", static_cast<int>(MsSince(start)));

  EXPECT_TRUE(first_master->running());
  EXPECT_EQ(deployment_->master(), first_replica);
  EXPECT_EQ(deployment_->MasterAddressAsSentinelsSee().value_or("?"), first_replica->address());
  absl::Status synced = deployment_->WaitUntilReplicaSynced(kRejoinTimeout);
  ASSERT_TRUE(synced.ok()) << synced;
  RecordProperty("forced_failover_rejoin_ms", static_cast<int>(MsSince(start)));
  EXPECT_THAT(first_master->Command({"ROLE"}).value_or("?"),
              StartsWith(absl::StrCat("slave\n127.0.0.1\n", first_replica->port(), "\n")));
}

// Verifies that a killed master restarted after the failover comes back as an empty master no
// sentinel names, and is then demoted by the sentinels to a synced replica of the new master.
TEST_F(RedisSentinelTest, RestartedOldMasterRejoinsAsReplica) {
  ASSERT_NO_FATAL_FAILURE(StartDeployment());
  RedisServer* first_master = deployment_->master();
  RedisServer* first_replica = deployment_->replica();
  ASSERT_NO_FATAL_FAILURE(KillMasterAndWait());
  ASSERT_EQ(first_replica->Command({"SET", "k", "new"}).value_or("?"), "OK");
  absl::Status restart = deployment_->RestartOldMaster();
  ASSERT_TRUE(restart.ok()) << restart;
  EXPECT_EQ(deployment_->RestartOldMaster().code(), absl::StatusCode::kFailedPrecondition);
  auto restarted = std::chrono::steady_clock::now();

  // The sentinels wait at least 8 s before demoting it: until then it is a master of its own.
  EXPECT_THAT(first_master->Command({"ROLE"}).value_or("?"), StartsWith("master\n"));
  EXPECT_EQ(first_master->Command({"GET", "k"}).value_or("?"), "(nil)");
  EXPECT_EQ(deployment_->MasterAddressAsSentinelsSee().value_or("?"), first_replica->address());

  absl::Status synced = deployment_->WaitUntilReplicaSynced(kRejoinTimeout);
  ASSERT_TRUE(synced.ok()) << synced;
  RecordProperty("rejoin_ms", static_cast<int>(MsSince(restarted)));
  EXPECT_THAT(first_master->Command({"ROLE"}).value_or("?"),
              StartsWith(absl::StrCat("slave\n127.0.0.1\n", first_replica->port(), "\n")));
  EXPECT_EQ(first_master->Command({"GET", "k"}).value_or("?"), "new");
  EXPECT_EQ(deployment_->MasterAddressAsSentinelsSee().value_or("?"), first_replica->address());
}

// Verifies that the helper asks only the live sentinels: with one of three killed, the other two
// still fail over (quorum 2), agree on the new master, and settle with the restarted old master.
TEST_F(RedisSentinelTest, FailsOverAndSettlesWithOneSentinelDead) {
  ASSERT_NO_FATAL_FAILURE(StartDeployment());
  RedisServer* first_replica = deployment_->replica();
  deployment_->sentinel(2)->Kill();

  ASSERT_NO_FATAL_FAILURE(KillMasterAndWait());

  EXPECT_EQ(deployment_->MasterAddressAsSentinelsSee().value_or("?"), first_replica->address());
  EXPECT_FALSE(deployment_->MasterAddressAsSeenBy(2).ok());
  absl::Status restart = deployment_->RestartOldMaster();
  ASSERT_TRUE(restart.ok()) << restart;
  absl::Status synced = deployment_->WaitUntilReplicaSynced(kRejoinTimeout);
  EXPECT_TRUE(synced.ok()) << synced;
}

// Verifies that options no deployment can satisfy are refused before anything starts.
TEST_F(RedisSentinelTest, RefusesImpossibleOptions) {
  RedisSentinelDeploymentOptions too_few;
  too_few.sentinels = 1;
  EXPECT_EQ(RedisSentinelDeployment::Start(too_few).status().code(),
            absl::StatusCode::kInvalidArgument);
  RedisSentinelDeploymentOptions no_ca;
  no_ca.tls = Tls();
  no_ca.tls.ca_file = "";
  EXPECT_EQ(RedisSentinelDeployment::Start(no_ca).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::testing
