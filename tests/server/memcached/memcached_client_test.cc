#include "server/memcached/memcached_client.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/failure_reason.h"
#include "server/memcached/server_placement.h"
#include "tests/support/memcached_server.h"
#include "tests/support/notification.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::MemcachedServer;
using testing::Notification;

// The SRV answers a test gives: a list, or a failure.
class TableResolver final : public SrvResolver {
 public:
  absl::StatusOr<std::vector<std::string>> Lookup(absl::string_view) override {
    absl::MutexLock lock(&mu_);
    return answer_;
  }
  void Answer(absl::StatusOr<std::vector<std::string>> answer) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(answer);
  }

 private:
  absl::Mutex mu_;
  absl::StatusOr<std::vector<std::string>> answer_ = absl::UnavailableError("no answer yet");
};

struct Outcome {
  absl::Status status;
  std::vector<MetaReply> replies;
};

class MemcachedClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      auto server = MemcachedServer::Start();
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
  }

  MemcachedClientOptions Options() {
    MemcachedClientOptions options;
    for (const auto& server : servers_) {
      options.servers.push_back(server->address());
    }
    options.backoff_min = absl::Milliseconds(5);
    options.backoff_max = absl::Milliseconds(50);
    options.breaker_budget = absl::Milliseconds(20);
    return options;
  }

  std::unique_ptr<MemcachedClient> Make(MemcachedClientOptions options,
                                        MemcachedClientResources resources = {}) {
    auto client = MemcachedClient::Create(std::move(options), RealClock::Get(),
                                          std::move(resources));
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) {
      return nullptr;
    }
    EXPECT_TRUE((*client)->WaitUntilReady(absl::Seconds(5)));
    return std::move(*client);
  }

  static Outcome Run(MemcachedClient& client, std::vector<MemcachedOp> ops,
                     absl::Duration budget = absl::Milliseconds(200)) {
    Outcome outcome;
    Notification done;
    client.Execute(std::move(ops),
                   RealClock::Get().MonotonicMicros() + absl::ToInt64Microseconds(budget),
                   [&](absl::Status status, std::vector<MetaReply> replies) {
                     outcome.status = std::move(status);
                     outcome.replies = std::move(replies);
                     done.Notify();
                   });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
    return outcome;
  }

  static MemcachedOp Increment(const std::string& key, uint64_t hits = 1) {
    MemcachedOp op{key, ""};
    AppendIncrementOrCreate(key, hits, 60, &op.command);
    return op;
  }

  std::vector<std::unique_ptr<MemcachedServer>> servers_;
};

// Verifies every key lands on the server gomemcache's placement names, in one Execute spread
// over the three servers, with the replies in operation order.
TEST_F(MemcachedClientTest, PlacesKeysAsUpstream) {
  auto client = Make(Options());
  ASSERT_NE(client, nullptr);
  std::vector<MemcachedOp> ops;
  for (int i = 0; i < 30; ++i) {
    ops.push_back(Increment(absl::StrCat("d_k_v", i, "_1700000000"), static_cast<uint64_t>(i + 1)));
  }
  Outcome outcome = Run(*client, ops);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  ASSERT_EQ(outcome.replies.size(), 30u);
  std::vector<int> per_server(3, 0);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(outcome.replies[i].value, static_cast<uint64_t>(i + 1));
    const std::string& key = ops[static_cast<size_t>(i)].key;
    const size_t home = PickServer(key, 3);
    ++per_server[home];
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_EQ(servers_[s]->Count(key), s == home ? i + 1 : -1) << key << " on server " << s;
    }
  }
  for (int count : per_server) {
    EXPECT_GT(count, 0);
  }
}

// Verifies a killed server's keys fail at once with the connection reason, then the breaker's,
// while the other servers' keys are served; and that the server is used again once restarted.
TEST_F(MemcachedClientTest, KilledServerFailsFastAndComesBack) {
  auto client = Make(Options());
  ASSERT_NE(client, nullptr);
  std::string on_second;
  std::string on_first;
  for (int i = 0; on_second.empty() || on_first.empty(); ++i) {
    const std::string key = absl::StrCat("key", i);
    (PickServer(key, 3) == 1 ? on_second : on_first) = key;
  }
  servers_[1]->Kill();
  absl::SleepFor(absl::Milliseconds(50));
  std::vector<FailureReason> reasons;
  for (int i = 0; i < 10; ++i) {
    const absl::Time start = absl::Now();
    Outcome outcome = Run(*client, {Increment(on_second)});
    EXPECT_FALSE(outcome.status.ok());
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
    reasons.push_back(FailureReasonOf(outcome.status));
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(reasons.front(), FailureReason::kConnection);
  EXPECT_EQ(reasons.back(), FailureReason::kCircuitOpen);
  EXPECT_TRUE(Run(*client, {Increment(on_first)}).status.ok());
  ASSERT_TRUE(servers_[1]->Restart().ok());
  const absl::Time until = absl::Now() + absl::Seconds(5);
  bool back = false;
  while (!back && absl::Now() < until) {
    back = Run(*client, {Increment(on_second)}).status.ok();
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(back);
  // Each connection reconnects on its own backoff: the first back serves, the other follows.
  std::vector<NodeMetrics> metrics;
  do {
    metrics.clear();
    client->CollectNodeMetrics(&metrics);
    ASSERT_EQ(metrics.size(), 3u);
    absl::SleepFor(absl::Milliseconds(10));
  } while (metrics[1].ready_connections < 2 && absl::Now() < until);
  EXPECT_GE(metrics[1].breaker_opens, 1u);
  EXPECT_GE(metrics[1].reconnects, 1u);
  EXPECT_EQ(metrics[1].ready_connections, 2);
}

// Verifies a paused (silent) server costs a call its budget and no more, reported as a timeout
// in flight, and that its breaker then answers at once.
TEST_F(MemcachedClientTest, PausedServerTimesOutWithinBudget) {
  MemcachedClientOptions options = Options();
  options.servers = {servers_[0]->address()};
  auto client = Make(options);
  ASSERT_NE(client, nullptr);
  servers_[0]->Pause();
  std::vector<FailureReason> reasons;
  for (int i = 0; i < 8; ++i) {
    const absl::Time start = absl::Now();
    Outcome outcome = Run(*client, {Increment("paused")}, absl::Milliseconds(20));
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(250));
    reasons.push_back(FailureReasonOf(outcome.status));
  }
  EXPECT_EQ(reasons.front(), FailureReason::kTimeoutInFlight);
  EXPECT_EQ(reasons.back(), FailureReason::kCircuitOpen);
  servers_[0]->Resume();
  const absl::Time until = absl::Now() + absl::Seconds(5);
  bool back = false;
  while (!back && absl::Now() < until) {
    back = Run(*client, {Increment("paused")}).status.ok();
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(back);
}

// Verifies SRV discovery: the first answer places every key, a refresh that adds servers moves
// keys where the new sorted list places them, and a failed refresh keeps the list.
TEST_F(MemcachedClientTest, SrvListIsFollowed) {
  auto resolver = std::make_shared<TableResolver>();
  MemcachedClientOptions options = Options();
  options.servers.clear();
  options.srv = "_memcache._tcp.test.local";
  EXPECT_FALSE(MemcachedClient::Create(options, RealClock::Get(), {resolver}).ok());
  resolver->Answer(std::vector<std::string>{servers_[0]->address()});
  auto client = Make(options, {resolver});
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Run(*client, {Increment("moving0"), Increment("moving1")}).status.ok());
  EXPECT_EQ(servers_[0]->Count("moving0"), 1);
  EXPECT_EQ(servers_[0]->Count("moving1"), 1);

  std::vector<std::string> all;
  for (const auto& server : servers_) {
    all.push_back(server->address());
  }
  std::sort(all.begin(), all.end());
  resolver->Answer(all);
  ASSERT_TRUE(client->RefreshServers().ok());
  EXPECT_EQ(client->server_addresses(), all);
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(5)));
  std::vector<MemcachedOp> ops;
  for (int i = 0; i < 12; ++i) {
    ops.push_back(Increment(absl::StrCat("spread", i)));
  }
  ASSERT_TRUE(Run(*client, ops).status.ok());
  for (const MemcachedOp& op : ops) {
    const std::string& home = all[PickServer(op.key, 3)];
    for (const auto& server : servers_) {
      EXPECT_EQ(server->Count(op.key), server->address() == home ? 1 : -1) << op.key;
    }
  }
  resolver->Answer(absl::UnavailableError("NXDOMAIN"));
  EXPECT_FALSE(client->RefreshServers().ok());
  EXPECT_EQ(client->server_addresses(), all);
  EXPECT_EQ(client->srv_failures(), 1u);
}

// Verifies an SRV answer of kMaxSrvTargets targets is taken and one of a target more is not: the
// start fails naming the SRV name, the count and the cap; a refresh keeps the list and counts a
// failure.
TEST_F(MemcachedClientTest, SrvAnswerOverTheCapIsRefused) {
  auto resolver = std::make_shared<TableResolver>();
  MemcachedClientOptions options = Options();
  options.servers.clear();
  options.srv = "_memcache._tcp.test.local";
  // One server listed kMaxSrvTargets times weighs that many times on one set of connections:
  // the cap reached with one server to run.
  const std::vector<std::string> at_cap(kMaxSrvTargets, servers_[0]->address());
  std::vector<std::string> over_cap = at_cap;
  over_cap.push_back(servers_[1]->address());

  resolver->Answer(over_cap);
  auto refused = MemcachedClient::Create(options, RealClock::Get(), {resolver});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr(options.srv));
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat(kMaxSrvTargets + 1, " targets, more than the ",
                                     kMaxSrvTargets)));

  resolver->Answer(at_cap);
  auto client = Make(options, {resolver});
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->server_addresses(), at_cap);
  EXPECT_EQ(client->servers(), 1);
  resolver->Answer(over_cap);
  EXPECT_EQ(client->RefreshServers().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(client->server_addresses(), at_cap);
  EXPECT_EQ(client->srv_failures(), 1u);
  ASSERT_TRUE(Run(*client, {Increment("capped")}).status.ok());
  EXPECT_EQ(servers_[0]->Count("capped"), 1);
}

// Verifies a connection's bound on commands waiting for replies: with the server silent, a batch
// that would pass it fails at once (kUnavailable, reason "other", the bound named) while one
// that reaches it exactly is written; once the server resumes, both batches written are answered
// and the connection serves again.
TEST_F(MemcachedClientTest, PendingCommandsBoundFailsFastAndRecovers) {
  MemcachedClientOptions options = Options();
  options.servers = {servers_[0]->address()};
  options.connections = 1;
  options.max_pending_commands = 4;
  auto client = Make(options);
  ASSERT_NE(client, nullptr);
  servers_[0]->Pause();
  const int64_t deadline = RealClock::Get().MonotonicMicros() + 10'000'000;
  Outcome first;
  Notification first_done;
  client->Execute({Increment("pending0"), Increment("pending1"), Increment("pending2")}, deadline,
                  [&](absl::Status status, std::vector<MetaReply> replies) {
                    first.status = std::move(status);
                    first.replies = std::move(replies);
                    first_done.Notify();
                  });
  const absl::Time start = absl::Now();
  Outcome refused = Run(*client, {Increment("refused0"), Increment("refused1")}, absl::Seconds(5));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kUnavailable) << refused.status;
  EXPECT_EQ(FailureReasonOf(refused.status), FailureReason::kOther);
  EXPECT_THAT(refused.status.message(), HasSubstr("too many commands waiting for replies"));
  EXPECT_THAT(refused.status.message(), HasSubstr("3 out, 2 more; at most 4"));
  EXPECT_FALSE(first_done.WaitForNotificationWithTimeout(absl::ZeroDuration()));
  Outcome last;
  Notification last_done;
  client->Execute({Increment("pending3")}, deadline,
                  [&](absl::Status status, std::vector<MetaReply> replies) {
                    last.status = std::move(status);
                    last.replies = std::move(replies);
                    last_done.Notify();
                  });

  servers_[0]->Resume();
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(last_done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(first.replies.size(), 3u);
  EXPECT_TRUE(last.status.ok()) << last.status;
  EXPECT_EQ(servers_[0]->Count("pending3"), 1);
  EXPECT_EQ(servers_[0]->Count("refused0"), -1);
  Outcome again = Run(*client, {Increment("refused0"), Increment("refused1")});
  EXPECT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(servers_[0]->Count("refused0"), 1);
}

// Verifies the refresh thread follows the SRV name on its interval.
TEST_F(MemcachedClientTest, SrvRefreshedOnItsInterval) {
  auto resolver = std::make_shared<TableResolver>();
  resolver->Answer(std::vector<std::string>{servers_[0]->address()});
  MemcachedClientOptions options = Options();
  options.servers.clear();
  options.srv = "_memcache._tcp.test.local";
  options.srv_refresh = absl::Milliseconds(50);
  auto client = Make(options, {resolver});
  ASSERT_NE(client, nullptr);
  resolver->Answer(std::vector<std::string>{servers_[1]->address()});
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (client->server_addresses() != std::vector<std::string>{servers_[1]->address()} &&
         absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(client->server_addresses(), std::vector<std::string>{servers_[1]->address()});
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(5)));
  ASSERT_TRUE(Run(*client, {Increment("after_refresh")}).status.ok());
  EXPECT_EQ(servers_[1]->Count("after_refresh"), 1);
  EXPECT_GE(client->srv_refreshes(), 1u);
}

}  // namespace
}  // namespace sluice
