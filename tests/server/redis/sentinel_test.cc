// RedisClient under Redis Sentinel, against a real deployment (a master, its replica, three
// sentinels; tests/support/redis_sentinel.h): the client finds the master, follows a failover
// under load (a killed master, and one moved by SENTINEL FAILOVER while the old one keeps
// running), never moves to a returning old master, and says clearly when the sentinels cannot
// name a master. Plain, and with TLS and passwords everywhere.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"
#include "server/redis/redis_client.h"
#include "server/redis/sentinel.h"
#include "tests/support/certificates.h"
#include "tests/support/notification.h"
#include "tests/support/process.h"
#include "tests/support/redis_sentinel.h"
#include "tests/support/unshared_status.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::RedisSentinelDeployment;
using testing::RedisSentinelDeploymentOptions;

constexpr absl::Duration kBudget = absl::Milliseconds(100);
constexpr char kMasterPassword[] = "master-secret";
constexpr char kSentinelPassword[] = "sentinel-secret";

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

// Runs one batch with the budget and waits for it.
absl::StatusOr<RedisReply> RunCommand(RedisClient& client, std::vector<std::string> args) {
  CommandBatch batch;
  std::vector<std::string_view> views(args.begin(), args.end());
  batch.Add(absl::MakeConstSpan(views));
  testing::Notification done;
  absl::Status status;
  RedisReply reply;
  client.Execute(std::move(batch),
                 RealClock::Get().MonotonicMicros() + absl::ToInt64Microseconds(kBudget),
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

// INCR of one key, one batch after another, from a thread of its own; records each outcome.
class Load {
 public:
  struct Outcome {
    int64_t started_us;
    int64_t completed_us;
    absl::StatusCode code;
  };

  explicit Load(RedisClient& client) : client_(client), thread_([this] { Loop(); }) {}
  ~Load() { Stop(); }

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::vector<Outcome> outcomes() {
    MutexLock lock(mu_);
    return outcomes_;
  }

 private:
  void Loop() {
    while (!stop_.load()) {
      const int64_t started = NowUs();
      absl::StatusOr<RedisReply> reply = RunCommand(client_, {"INCR", "sentinel:load"});
      Outcome o{started, NowUs(), reply.status().code()};
      if (reply.ok() && !reply->is_integer()) {
        o.code = absl::StatusCode::kInternal;  // an error reply (READONLY, ...)
      }
      MutexLock lock(mu_);
      outcomes_.push_back(o);
    }
  }

  RedisClient& client_;
  std::atomic<bool> stop_{false};
  Mutex mu_;
  std::vector<Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class RedisSentinelTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    tls_ = GetParam();
    RedisSentinelDeploymentOptions options;
    if (tls_) {
      ASSERT_TRUE(testing::MakeCa(dir_.path(), "ca").ok());
      ASSERT_TRUE(testing::MakeCert(dir_.path(), "redis", "ca").ok());
      options.tls.enabled = true;
      options.tls.cert_file = dir_.path() + "/redis.crt";
      options.tls.key_file = dir_.path() + "/redis.key";
      options.tls.ca_file = dir_.path() + "/ca.crt";
      options.master_password = kMasterPassword;
      options.sentinel_password = kSentinelPassword;
    }
    absl::StatusOr<std::unique_ptr<RedisSentinelDeployment>> started =
        RedisSentinelDeployment::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    deployment_ = *std::move(started);
  }

  RedisClientOptions ClientOptions() const {
    RedisClientOptions options;
    options.sentinel.addresses = deployment_->SentinelAddresses();
    options.sentinel.master = deployment_->master_name();
    options.connections_per_thread = 2;
    options.connect_timeout = absl::Milliseconds(500);
    options.backoff_min = absl::Milliseconds(20);
    options.backoff_max = absl::Milliseconds(200);
    options.breaker_budget = kBudget;
    if (tls_) {
      options.tls.enabled = true;
      options.tls.ca_file = dir_.path() + "/ca.crt";
      options.password = kMasterPassword;
      options.sentinel.password = kSentinelPassword;
    }
    return options;
  }

  std::unique_ptr<RedisClient> NewClient() {
    absl::StatusOr<std::unique_ptr<RedisClient>> client =
        RedisClient::Create(ClientOptions(), RealClock::Get());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The key's value on `server`, read from its plain port.
  static std::string ValueOn(testing::RedisServer& server) {
    return server.Command({"GET", "sentinel:load"}).value_or("?");
  }

  // Judges a failover's outcomes: nothing hung, failures fast and of the expected kinds, and
  // success again within `recover_within` of `switched_us`.
  void ExpectFollowed(const std::vector<Load::Outcome>& outcomes, int64_t fault_us,
                      int64_t switched_us, absl::Duration recover_within) {
    int failures = 0;
    int64_t first_success_after = -1;
    int64_t slowest_failure_us = 0;
    for (const Load::Outcome& o : outcomes) {
      if (o.code == absl::StatusCode::kOk) {
        if (o.started_us >= switched_us && first_success_after < 0) {
          first_success_after = o.completed_us;
        }
        continue;
      }
      ++failures;
      slowest_failure_us = std::max(slowest_failure_us, o.completed_us - o.started_us);
      EXPECT_TRUE(o.code == absl::StatusCode::kUnavailable ||
                  o.code == absl::StatusCode::kDeadlineExceeded ||
                  o.code == absl::StatusCode::kInternal)
          << static_cast<int>(o.code);
      EXPECT_GE(o.started_us, fault_us - absl::ToInt64Microseconds(kBudget))
          << "a failure before the fault";
    }
    // Fail fast: never much past the budget (slack for a loaded machine and sanitizers).
    EXPECT_LE(slowest_failure_us, absl::ToInt64Microseconds(kBudget) + 700000);
    ASSERT_GE(first_success_after, 0) << "no success after the switch";
    EXPECT_LE(first_success_after - switched_us, absl::ToInt64Microseconds(recover_within))
        << "took too long to reach the new master";
    std::printf("%s: %d failed batches, slowest failure %lld ms, first success %lld ms after the "
                "sentinels agreed, %lld ms after the fault\n",
                tls_ ? "TLS" : "plain", failures,
                static_cast<long long>(slowest_failure_us / 1000),
                static_cast<long long>((first_success_after - switched_us) / 1000),
                static_cast<long long>((first_success_after - fault_us) / 1000));
  }

  bool tls_ = false;
  testing::TempDir dir_;
  std::unique_ptr<RedisSentinelDeployment> deployment_;
};

TEST_P(RedisSentinelTest, FindsTheMasterAndFollowsAKilledMastersFailoverUnderLoad) {
  std::unique_ptr<RedisClient> client = NewClient();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(10)));
  testing::RedisServer* old_master = deployment_->master();
  testing::RedisServer* replica = deployment_->replica();

  Load load(*client);
  absl::SleepFor(absl::Milliseconds(300));
  const int64_t killed_us = NowUs();
  deployment_->KillMaster();
  ASSERT_TRUE(deployment_->WaitForFailover(std::chrono::seconds(30)).ok());
  const int64_t switched_us = NowUs();
  absl::SleepFor(absl::Milliseconds(1500));
  load.Stop();

  // Within one budget and the watcher's reaction of the sentinels' agreement (which is when the
  // +switch-master message goes out).
  ExpectFollowed(load.outcomes(), killed_us, switched_us, absl::Milliseconds(1000) + kBudget);
  ASSERT_EQ(deployment_->master(), replica);
  // Every success after the switch landed on the new master (it has them on top of what it
  // replicated before the kill, which may miss the last few: replication is asynchronous).
  int64_t after = 0;
  for (const Load::Outcome& o : load.outcomes()) {
    after += o.code == absl::StatusCode::kOk && o.started_us >= switched_us ? 1 : 0;
  }
  int64_t on_new_master = 0;
  ASSERT_TRUE(absl::SimpleAtoi(ValueOn(*replica), &on_new_master));
  EXPECT_GE(on_new_master, after);
  // At most every INCR sent (one that timed out here may still have run there).
  EXPECT_LE(on_new_master, static_cast<int64_t>(load.outcomes().size()));
  (void)old_master;
}

TEST_P(RedisSentinelTest, FollowsAFailoverWhileTheOldMasterKeepsRunning) {
  std::unique_ptr<RedisClient> client = NewClient();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(10)));
  testing::RedisServer* old_master = deployment_->master();
  testing::RedisServer* replica = deployment_->replica();

  Load load(*client);
  absl::SleepFor(absl::Milliseconds(300));
  const int64_t forced_us = NowUs();
  // SENTINEL FAILOVER: the old master is not killed (it is told to become a replica), so no
  // connection is lost: only +switch-master can move the client.
  ASSERT_TRUE(deployment_->ForceFailover(std::chrono::seconds(30)).ok());
  const int64_t switched_us = NowUs();
  absl::SleepFor(absl::Milliseconds(1500));
  load.Stop();

  ExpectFollowed(load.outcomes(), forced_us, switched_us, absl::Milliseconds(1000) + kBudget);
  // The client's writes go to the new master, and only there.
  EXPECT_EQ(deployment_->master(), replica);
  int64_t before = 0;
  ASSERT_TRUE(absl::SimpleAtoi(ValueOn(*replica), &before));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(RunCommand(*client, {"INCR", "sentinel:load"}).ok());
  }
  EXPECT_EQ(ValueOn(*replica), absl::StrCat(before + 10));
  (void)old_master;
}

TEST_P(RedisSentinelTest, NeverMovesToAnOldMasterThatComesBackAsAnEmptyMaster) {
  std::unique_ptr<RedisClient> client = NewClient();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(10)));
  testing::RedisServer* replica = deployment_->replica();
  deployment_->KillMaster();
  ASSERT_TRUE(deployment_->WaitForFailover(std::chrono::seconds(30)).ok());
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(5)));
  // Back with no data and ROLE master, until the sentinels demote it seconds later: a client
  // that connected to whatever answered ROLE master on its old address would split the counts.
  ASSERT_TRUE(deployment_->RestartOldMaster().ok());
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(RunCommand(*client, {"INCR", "sentinel:after"}).ok());
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(replica->Command({"GET", "sentinel:after"}).value_or("?"), "30");
}

TEST_P(RedisSentinelTest, AMasterNoSentinelKnowsFailsClearlyAndNeverConnects) {
  RedisClientOptions options = ClientOptions();
  options.sentinel.master = "no-such-master";
  absl::StatusOr<std::unique_ptr<RedisClient>> client =
      RedisClient::Create(std::move(options), RealClock::Get());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_FALSE((*client)->WaitUntilReady(absl::Milliseconds(800)));
  absl::StatusOr<RedisReply> reply = RunCommand(**client, {"PING"});
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(reply.status().message(), HasSubstr("asking the sentinels")) << reply.status();
}

// A sentinel that answers every command it reads with one reply, on every connection.
class HostileSentinel {
 public:
  explicit HostileSentinel(std::string reply) : reply_(std::move(reply)) {
    const testing::LoopbackListener listener = testing::ListenOnLoopback(16);
    listen_fd_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this] { Serve(); });
  }
  ~HostileSentinel() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int commands() const { return commands_.load(); }

 private:
  // One connection at a time: the watcher opens one, asks, and closes it.
  void Serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) {
        continue;
      }
      const int fd = accept(listen_fd_, nullptr, nullptr);
      char buf[4096];
      while (fd >= 0 && !stop_) {
        pollfd q{fd, POLLIN, 0};
        if (poll(&q, 1, 20) == 0) {
          continue;
        }
        if (read(fd, buf, sizeof(buf)) <= 0 ||
            send(fd, reply_.data(), reply_.size(), MSG_NOSIGNAL) < 0) {
          break;
        }
        ++commands_;
      }
      if (fd >= 0) {
        close(fd);
      }
    }
  }

  const std::string reply_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> commands_{0};
  std::thread thread_;
};

// Verifies a hostile sentinel (naming a master host that cannot be a host name, one of 300
// bytes, or answering with an array of ten million or a string of two billion bytes) is never
// followed, makes the watcher allocate nothing it announced, and puts none of its bytes raw in
// the log: no forged line, no terminal escape.
TEST(HostileSentinelTest, NamesNoMasterAndForgesNoLogLine) {
  const std::string forged = "evil\nE 2026-01-01T00:00:00Z forged.cc:1] \x1b[31mowned";
  const std::string replies[] = {
      absl::StrCat("*2\r\n$", forged.size(), "\r\n", forged, "\r\n$4\r\n6379\r\n"),
      absl::StrCat("*2\r\n$300\r\n", std::string(300, 'h'), "\r\n$4\r\n6379\r\n"),
      "-ERR " + forged.substr(0, 4) + "\x1b[31m no such master\r\n",
      "*10000000\r\n",
      "$2000000000\r\n",
  };
  for (const std::string& reply : replies) {
    SCOPED_TRACE(reply.substr(0, 40));
    HostileSentinel sentinel(reply);
    SentinelWatcherOptions options;
    options.sentinel.addresses = {sentinel.address()};
    options.sentinel.master = "mymaster";
    options.retry_interval = absl::Milliseconds(20);
    std::atomic<int> reported{0};
    ::testing::internal::CaptureStderr();
    {
      SentinelWatcher watcher(options, [&](const RedisEndpoint&) { ++reported; });
      watcher.Start();
      const absl::Time deadline = absl::Now() + absl::Seconds(5);
      while (sentinel.commands() < 3 && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      EXPECT_GE(sentinel.commands(), 3);
      EXPECT_EQ(watcher.rounds_found(), 0);
    }
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(reported.load(), 0);
    EXPECT_THAT(log, ::testing::Not(HasSubstr("\x1b")));
    EXPECT_THAT(log, ::testing::Not(HasSubstr("\nE 2026-01-01")));
  }
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, RedisSentinelTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("TlsAndPasswords")
                                             : std::string("Plain");
                         });

}  // namespace
}  // namespace sluice
