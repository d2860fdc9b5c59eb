#include "server/redis/redis_client.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/notification.h"
#include "server/common/failure_reason.h"
#include "server/common/clock.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/unshared_status.h"

namespace sluice {
namespace {

using testing::Notification;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RedisServer;
using testing::RedisServerOptions;

constexpr char kIncrByScript[] = "return redis.call('INCRBY', KEYS[1], ARGV[1])";

// What a batch callback saw.
struct BatchResult {
  absl::Status status;
  std::vector<RedisReply> replies;
  int64_t completed_us = 0;  // RealClock monotonic
  std::thread::id thread;
};

// A batch in flight; shared with its callback so a test that gives up waiting stays safe.
struct PendingResult {
  Notification done;
  BatchResult result;
};

class RedisClientTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = StartServer({}); }

  std::unique_ptr<RedisServer> StartServer(RedisServerOptions options) {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(std::move(options));
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // A client of server_ (unless options.address is set), ready unless `wait_ready` is false.
  std::unique_ptr<RedisClient> NewClient(RedisClientOptions options = {}, bool wait_ready = true,
                                         RedisClientResources resources = {}) {
    if (options.address.empty()) {
      options.address = server_->address();
    }
    absl::StatusOr<std::unique_ptr<RedisClient>> client =
        RedisClient::Create(std::move(options), clock_, std::move(resources));
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) {
      return nullptr;
    }
    if (wait_ready) {
      EXPECT_TRUE((*client)->WaitUntilReady(absl::Seconds(20)));
    }
    return *std::move(client);
  }

  int64_t Now() const { return clock_.MonotonicMicros(); }

  // Starts a batch; the result is ready once `done` is notified.
  std::shared_ptr<PendingResult> Start(RedisClient& client, CommandBatch batch,
                                       int64_t deadline_us) {
    auto pending = std::make_shared<PendingResult>();
    client.Execute(std::move(batch), deadline_us,
                   [pending, this](absl::Status status, absl::Span<RedisReply> replies) {
                     pending->result.status = testing::UnsharedCopy(status);
                     pending->result.replies.assign(std::make_move_iterator(replies.begin()),
                                                    std::make_move_iterator(replies.end()));
                     pending->result.completed_us = Now();
                     pending->result.thread = std::this_thread::get_id();
                     pending->done.Notify();
                   });
    return pending;
  }

  BatchResult Await(const std::shared_ptr<PendingResult>& pending) {
    EXPECT_TRUE(pending->done.WaitForNotificationWithTimeout(absl::Seconds(30)))
        << "batch callback never ran";
    // Moved out: the callback's copy of `pending` may be released on the client's thread.
    return pending->done.HasBeenNotified() ? std::move(pending->result) : BatchResult{};
  }

  // Runs a batch with a generous budget and waits for it.
  BatchResult Run(RedisClient& client, CommandBatch batch,
                  absl::Duration budget = absl::Seconds(5)) {
    return Await(Start(client, std::move(batch), Now() + absl::ToInt64Microseconds(budget)));
  }

  BatchResult RunOne(RedisClient& client, std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    CommandBatch batch;
    batch.Add(views);
    return Run(client, std::move(batch));
  }

  RealClock& clock_ = RealClock::Get();
  std::unique_ptr<RedisServer> server_;
};

// Verifies a large pipelined batch comes back complete and in command order.
TEST_F(RedisClientTest, LargeBatchRepliesInOrder) {
  std::unique_ptr<RedisClient> client = NewClient();
  constexpr int kKeys = 1000;
  CommandBatch batch;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(absl::StrCat("order:", i));
  }
  for (int i = 0; i < kKeys; ++i) {
    std::string value = absl::StrCat(i * 7);
    batch.Add({"SET", keys[i], value});
  }
  for (int i = 0; i < kKeys; ++i) {
    batch.Add({"GET", keys[i]});
  }
  batch.Add({"INCRBY", "order:counter", "5"});
  batch.Add({"GET", "order:missing"});

  BatchResult result = Run(*client, std::move(batch));
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.replies.size(), 2u * kKeys + 2);
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(result.replies[i], RedisReply::Status("OK"));
    EXPECT_EQ(result.replies[kKeys + i], RedisReply::String(absl::StrCat(i * 7)));
  }
  EXPECT_EQ(result.replies[2 * kKeys], RedisReply::Integer(5));
  EXPECT_TRUE(result.replies[2 * kKeys + 1].is_nil());
}

// Verifies callbacks run on an I/O thread, not the caller's.
TEST_F(RedisClientTest, CallbackRunsOnIoThread) {
  std::unique_ptr<RedisClient> client = NewClient();
  BatchResult result = RunOne(*client, {"PING"});
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_THAT(result.replies, ElementsAre(RedisReply::Status("PONG")));
  EXPECT_NE(result.thread, std::this_thread::get_id());
}

// Verifies a Redis error in one command is that command's reply, not the batch's status.
TEST_F(RedisClientTest, ErrorRepliesStayInTheBatch) {
  std::unique_ptr<RedisClient> client = NewClient();
  CommandBatch batch;
  batch.Add({"SET", "typed", "v"}).Add({"LPUSH", "typed", "x"}).Add({"GET", "typed"});
  BatchResult result = Run(*client, std::move(batch));
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.replies.size(), 3u);
  EXPECT_EQ(result.replies[1].ErrorCode(), "WRONGTYPE");
  EXPECT_EQ(result.replies[2], RedisReply::String("v"));
}

// Verifies thousands of batches from several threads over several loops and connections each
// complete exactly once, successfully, and every command ran exactly once.
TEST_F(RedisClientTest, ConcurrentBatchesCompleteExactlyOnce) {
  std::unique_ptr<RedisClient> client = NewClient({.io_threads = 2, .connections_per_thread = 2});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1500;
  constexpr int kTotal = kThreads * kPerThread;
  std::vector<std::atomic<int>> calls(kTotal);
  std::atomic<int> failures{0};
  std::mutex mu;
  std::condition_variable progressed;
  int completed = 0;

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int id = t * kPerThread + i;
        CommandBatch batch;
        batch.Add({"INCR", "concurrent:counter"}).Add({"PING"});
        client->Execute(
            std::move(batch), Now() + 20000000,
            [&, id](absl::Status status, absl::Span<RedisReply> replies) {
              calls[id].fetch_add(1);
              if (!status.ok() || replies.size() != 2 || replies[1] != RedisReply::Status("PONG")) {
                failures.fetch_add(1);
              }
              std::lock_guard<std::mutex> lock(mu);
              ++completed;
              progressed.notify_all();
            });
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(
        progressed.wait_for(lock, std::chrono::seconds(60), [&] { return completed >= kTotal; }));
  }
  // After Stop no callback can run any more, so a count of one is final.
  client->Stop();
  for (int id = 0; id < kTotal; ++id) {
    ASSERT_EQ(calls[id].load(), 1) << "batch " << id;
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(*server_->Command({"GET", "concurrent:counter"}), absl::StrCat(kTotal));
}

// Verifies EVALSHA of a registered script runs, and after SCRIPT FLUSH a pipelined batch of
// EVALSHAs still succeeds: one SCRIPT LOAD heals them all and each ran exactly once.
TEST_F(RedisClientTest, HealsNoScriptWithOneLoad) {
  std::unique_ptr<RedisClient> client = NewClient();
  const RedisScript* script = *client->RegisterScript("incrby", kIncrByScript);
  // Registered after the handshake: the first use meets NOSCRIPT and heals it.
  CommandBatch first;
  first.AddEvalSha(*script, {"script:key"}, {"1"});
  BatchResult result = Run(*client, std::move(first));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_THAT(result.replies, ElementsAre(RedisReply::Integer(1)));
  uint64_t loads_before = client->stats().totals.script_loads;

  ASSERT_TRUE(server_->Command({"SCRIPT", "FLUSH"}).ok());
  constexpr int kCommands = 200;
  CommandBatch batch;
  for (int i = 0; i < kCommands; ++i) {
    batch.AddEvalSha(*script, {"script:key"}, {"2"});
  }
  result = Run(*client, std::move(batch));
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.replies.size(), static_cast<size_t>(kCommands));
  for (int i = 0; i < kCommands; ++i) {
    EXPECT_EQ(result.replies[i], RedisReply::Integer(1 + 2 * (i + 1)));
  }
  RedisClientStats stats = client->stats();
  EXPECT_EQ(stats.totals.script_loads - loads_before, 1u);
  EXPECT_GE(stats.totals.noscript_retries, static_cast<uint64_t>(kCommands));
  EXPECT_EQ(*server_->Command({"GET", "script:key"}), absl::StrCat(1 + 2 * kCommands));

  // The same across many batches in flight at once: whatever went out before the load is
  // resent behind it, whatever went out after it succeeds.
  ASSERT_TRUE(server_->Command({"SCRIPT", "FLUSH"}).ok());
  loads_before = client->stats().totals.script_loads;
  std::vector<std::shared_ptr<PendingResult>> pending;
  for (int i = 0; i < 50; ++i) {
    pending.push_back(Start(*client, CommandBatch().AddEvalSha(*script, {"script:other"}, {"1"}),
                            Now() + 5000000));
  }
  for (const auto& one : pending) {
    BatchResult each = Await(one);
    ASSERT_TRUE(each.status.ok()) << each.status;
    EXPECT_TRUE(each.replies.at(0).is_integer()) << each.replies.at(0).DebugString();
  }
  EXPECT_EQ(client->stats().totals.script_loads - loads_before, 1u);
  EXPECT_EQ(*server_->Command({"GET", "script:other"}), "50");
}

// Verifies callers never see NOSCRIPT while scripts are flushed again and again under load on
// several connections. A batch is resent at most kMaxNoScriptRetries (3) times, past which the
// script "keeps disappearing": so each batch is let see at most two flushes (up to 20 batches
// stay in flight across each), however slowly the client's thread runs (ASan).
TEST_F(RedisClientTest, SurvivesRepeatedScriptFlushUnderLoad) {
  std::unique_ptr<RedisClient> client = NewClient({.connections_per_thread = 3});
  const RedisScript* script = *client->RegisterScript("incrby", kIncrByScript);
  constexpr int kBatches = 300;
  constexpr int kFlushEvery = 10;
  std::vector<std::shared_ptr<PendingResult>> pending;
  size_t settled = 0;
  for (int i = 0; i < kBatches; ++i) {
    CommandBatch batch;
    for (int k = 0; k < 5; ++k) {
      batch.AddEvalSha(*script, {"flushed"}, {"1"});
    }
    pending.push_back(Start(*client, std::move(batch), Now() + 10000000));
    if (i % kFlushEvery == 0) {
      for (; settled + 2 * kFlushEvery <= static_cast<size_t>(i); ++settled) {
        ASSERT_TRUE(pending[settled]->done.WaitForNotificationWithTimeout(absl::Seconds(30)));
      }
      // Lands while earlier batches are in flight.
      ASSERT_TRUE(server_->Command({"SCRIPT", "FLUSH"}).ok());
    }
  }
  int ok = 0;
  for (const auto& one : pending) {
    BatchResult result = Await(one);
    EXPECT_TRUE(result.status.ok()) << result.status;
    for (const RedisReply& reply : result.replies) {
      EXPECT_TRUE(reply.is_integer()) << reply.DebugString();
    }
    ok += result.status.ok() ? 1 : 0;
  }
  EXPECT_GT(client->stats().totals.noscript_retries, 0u);
  EXPECT_EQ(*server_->Command({"GET", "flushed"}), absl::StrCat(5 * ok));
}

// Verifies scripts registered before connecting are loaded by the handshake: no NOSCRIPT.
TEST_F(RedisClientTest, HandshakeLoadsRegisteredScripts) {
  auto scripts = std::make_shared<ScriptCache>();
  const RedisScript* script = *scripts->Register("incrby", kIncrByScript);
  std::unique_ptr<RedisClient> client = NewClient({}, true, {.scripts = scripts});
  CommandBatch batch;
  batch.AddEvalSha(*script, {"preloaded"}, {"3"});
  BatchResult result = Run(*client, std::move(batch));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_THAT(result.replies, ElementsAre(RedisReply::Integer(3)));
  EXPECT_EQ(client->stats().totals.noscript_retries, 0u);
}

// Verifies a script Redis refuses to compile fails its batch cleanly instead of looping.
TEST_F(RedisClientTest, UnloadableScriptFailsTheBatch) {
  std::unique_ptr<RedisClient> client = NewClient();
  const RedisScript* broken = *client->RegisterScript("broken", "return +");
  CommandBatch batch;
  batch.AddEvalSha(*broken, {"k"}, {});
  BatchResult result = Run(*client, std::move(batch));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInternal) << result.status;
  EXPECT_THAT(std::string(result.status.message()), HasSubstr("compiling"));
  // The connection is still fine.
  EXPECT_TRUE(RunOne(*client, {"PING"}).status.ok());
}

// Verifies AUTH with requirepass, and that a wrong or missing password never gets ready and
// fails batches fast.
TEST_F(RedisClientTest, AuthenticatesWithPassword) {
  std::unique_ptr<RedisServer> server = StartServer({.password = "s3cret"});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client =
      NewClient({.address = server->address(), .password = "s3cret"});
  BatchResult result = RunOne(*client, {"SET", "auth:key", "1"});
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.replies[0], RedisReply::Status("OK"));

  for (std::string password : {"wrong", ""}) {
    std::unique_ptr<RedisClient> refused =
        NewClient({.address = server->address(), .password = password}, /*wait_ready=*/false);
    EXPECT_FALSE(refused->WaitUntilReady(absl::Milliseconds(300)));
    int64_t start = Now();
    BatchResult failed = RunOne(*refused, {"GET", "auth:key"});
    EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable) << failed.status;
    EXPECT_LT(failed.completed_us - start, 1000000);
  }
}

// Verifies AUTH as an ACL user: the connection acts as that user.
TEST_F(RedisClientTest, AuthenticatesAsAclUser) {
  std::unique_ptr<RedisServer> server =
      StartServer({.acl_users = {"alice on >wonderland ~* &* +@all"}});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client =
      NewClient({.address = server->address(), .username = "alice", .password = "wonderland"});
  BatchResult result = RunOne(*client, {"ACL", "WHOAMI"});
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.replies[0], RedisReply::String("alice"));

  std::unique_ptr<RedisClient> refused = NewClient(
      {.address = server->address(), .username = "alice", .password = "looking-glass"}, false);
  EXPECT_FALSE(refused->WaitUntilReady(absl::Milliseconds(300)));
}

// Verifies SELECT: clients of different databases do not see each other's keys.
TEST_F(RedisClientTest, SelectIsolatesDatabases) {
  std::unique_ptr<RedisClient> db3 = NewClient({.db = 3});
  std::unique_ptr<RedisClient> db0 = NewClient();
  ASSERT_TRUE(RunOne(*db3, {"SET", "db:key", "three"}).status.ok());
  EXPECT_TRUE(RunOne(*db0, {"GET", "db:key"}).replies.at(0).is_nil());
  EXPECT_EQ(RunOne(*db3, {"GET", "db:key"}).replies.at(0), RedisReply::String("three"));
  EXPECT_EQ(*server_->Command({"DBSIZE"}), "0");  // the helper talks to db 0
}

// Verifies a hung (paused) Redis costs each batch its deadline and no more: kDeadlineExceeded
// close to the deadline; after Resume the late replies are dropped and batches succeed again.
TEST_F(RedisClientTest, PausedServerMissesDeadlinesThenRecovers) {
  // No breaker: this is about each batch's own deadline (the breaker has its own test).
  std::unique_ptr<RedisClient> client =
      NewClient({.stall_timeout = absl::Seconds(60), .breaker_failures = 0});
  ASSERT_TRUE(RunOne(*client, {"PING"}).status.ok());
  server_->Pause();
  constexpr int kBatches = 20;
  constexpr int64_t kBudgetUs = 100000;
  std::vector<std::shared_ptr<PendingResult>> pending;
  std::vector<int64_t> deadlines;
  for (int i = 0; i < kBatches; ++i) {
    CommandBatch batch;
    batch.Add({"INCR", "paused:counter"});
    deadlines.push_back(Now() + kBudgetUs);
    pending.push_back(Start(*client, std::move(batch), deadlines.back()));
  }
  for (int i = 0; i < kBatches; ++i) {
    BatchResult result = Await(pending[i]);
    EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded) << result.status;
    EXPECT_TRUE(result.replies.empty());
    EXPECT_GE(result.completed_us, deadlines[i]);
    EXPECT_LE(result.completed_us, deadlines[i] + 500000) << "deadline overshot";
  }
  server_->Resume();
  BatchResult after = RunOne(*client, {"GET", "paused:counter"});
  ASSERT_TRUE(after.status.ok()) << after.status;
  // The expired INCRs still reached Redis (they were on the wire); their replies were dropped,
  // all before this GET's reply since one connection answers in order.
  EXPECT_EQ(after.replies[0], RedisReply::String(absl::StrCat(kBatches)));
  RedisClientStats stats = client->stats();
  EXPECT_EQ(stats.totals.late_replies, static_cast<uint64_t>(kBatches));
  EXPECT_EQ(stats.totals.deadline_exceeded, static_cast<uint64_t>(kBatches));
  // /metrics: the timeouts, and every call's latency (the two answered ones fast, the timed-out
  // ones at their budget).
  std::vector<NodeMetrics> nodes;
  client->CollectNodeMetrics(&nodes);
  std::string text;
  AppendNodeMetrics(nodes, &text);
  const std::string node = absl::StrCat("node=\"", server_->address(), "\"");
  EXPECT_THAT(text, HasSubstr(absl::StrCat("sluice_redis_timeouts_total{", node, "} 20\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("sluice_redis_call_duration_seconds_bucket{", node,
                                           ",le=\"0.05\"} 2\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("sluice_redis_call_duration_seconds_count{", node,
                                           "} 22\n")));
}

// Verifies the node's circuit breaker: against a paused server, after `breaker_failures`
// timeouts in a row a batch fails at once (kCircuitOpen) instead of waiting out its budget; once
// the server answers again, the client's own probe closes the breaker when the open period ends,
// with no batch of a caller's spent on it.
TEST_F(RedisClientTest, CircuitBreakerFailsFastAgainstAPausedServerThenCloses) {
  // A generous queue grace: under TSan handing a batch to the loop can take longer than the
  // budget, and this test is about timeouts in flight, not before sending.
  std::unique_ptr<RedisClient> client = NewClient({.stall_timeout = absl::Seconds(60),
                                                   .queue_grace = absl::Seconds(1),
                                                   .breaker_failures = 3,
                                                   .breaker_open = absl::Milliseconds(300)});
  ASSERT_TRUE(RunOne(*client, {"PING"}).status.ok());
  server_->Pause();
  for (int i = 0; i < 3; ++i) {
    BatchResult result = Run(*client, CommandBatch().Add({"PING"}), absl::Milliseconds(50));
    EXPECT_EQ(FailureReasonOf(result.status), FailureReason::kTimeoutInFlight) << result.status;
  }
  EXPECT_TRUE(client->stats().breaker_open);
  const int64_t begin = Now();
  BatchResult rejected = Run(*client, CommandBatch().Add({"PING"}), absl::Milliseconds(50));
  EXPECT_EQ(FailureReasonOf(rejected.status), FailureReason::kCircuitOpen) << rejected.status;
  EXPECT_LT(rejected.completed_us - begin, 40000) << "waited for the budget";
  server_->Resume();
  // The probe is due 300 ms after the breaker opened; it needs no traffic to go.
  const int64_t closing_by = Now() + 5000000;
  while (client->stats().breaker_open && Now() < closing_by) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(client->stats().breaker_open);
  EXPECT_TRUE(RunOne(*client, {"PING"}).status.ok());
  RedisClientStats stats = client->stats();
  EXPECT_FALSE(stats.breaker_open);
  EXPECT_EQ(stats.breaker_opens, 1u);
  EXPECT_EQ(stats.breaker_rejected, 1u);
  std::string metrics;
  std::vector<NodeMetrics> nodes;
  client->CollectNodeMetrics(&nodes);
  AppendNodeMetrics(nodes, &metrics);
  EXPECT_NE(metrics.find(absl::StrCat("sluice_redis_breaker_opens_total{node=\"",
                                      server_->address(), "\"} 1\n")),
            std::string::npos)
      << metrics;
}

// Verifies a connection that stops answering altogether is dropped after the stall timeout,
// failing its batches with kUnavailable long before their deadline, and comes back.
TEST_F(RedisClientTest, StalledConnectionIsDroppedAndReconnects) {
  std::unique_ptr<RedisClient> client = NewClient(
      {.connect_timeout = absl::Milliseconds(200), .stall_timeout = absl::Milliseconds(200)});
  server_->Pause();
  int64_t start = Now();
  BatchResult result = Await(Start(*client, CommandBatch().Add({"PING"}), Now() + 30000000));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_LT(result.completed_us - start, 5000000);
  EXPECT_EQ(client->ready_connections(), 0);
  server_->Resume();
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(20)));
  EXPECT_TRUE(RunOne(*client, {"PING"}).status.ok());
}

// Verifies a killed Redis fails batches fast with kUnavailable (not at their deadline), and
// after a restart on the same port the client reconnects and loads its scripts again.
TEST_F(RedisClientTest, KilledServerFailsFastThenReconnectsAfterRestart) {
  std::unique_ptr<RedisClient> client = NewClient({.backoff_max = absl::Milliseconds(200)});
  const RedisScript* script = *client->RegisterScript("incrby", kIncrByScript);
  ASSERT_TRUE(Run(*client, CommandBatch().AddEvalSha(*script, {"k"}, {"1"})).status.ok());

  // In flight when Redis dies: fails when the connection drops, not at the deadline.
  server_->Pause();
  int64_t sent = Now();
  std::shared_ptr<PendingResult> in_flight =
      Start(*client, CommandBatch().Add({"PING"}).Add({"PING"}), Now() + 30000000);
  server_->Kill();
  BatchResult lost = Await(in_flight);
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable) << lost.status;
  EXPECT_LT(lost.completed_us - sent, 2000000);

  for (int i = 0; i < 3; ++i) {
    int64_t start = Now();
    BatchResult result = Await(Start(*client, CommandBatch().Add({"PING"}), Now() + 10000000));
    EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
    EXPECT_LT(result.completed_us - start, 2000000) << "not fast";
  }
  EXPECT_EQ(client->ready_connections(), 0);

  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(client->WaitUntilReady(absl::Seconds(20)));
  uint64_t heal_loads = client->stats().totals.script_loads;
  BatchResult result = Run(*client, CommandBatch().AddEvalSha(*script, {"k"}, {"4"}));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_THAT(result.replies, ElementsAre(RedisReply::Integer(4)));  // data did not survive
  // The restarted server had no scripts; the reconnect handshake loaded it, no NOSCRIPT needed.
  EXPECT_EQ(client->stats().totals.script_loads, heal_loads);
  EXPECT_GE(client->stats().totals.connects, 2u);
  std::vector<NodeMetrics> nodes;
  client->CollectNodeMetrics(&nodes);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].address, server_->address());
  EXPECT_EQ(nodes[0].ready_connections, client->ready_connections());
  EXPECT_GE(nodes[0].reconnects, 1u);
}

// Verifies that with no Redis at all batches fail at once and nothing hangs.
TEST_F(RedisClientTest, NoServerFailsFast) {
  std::unique_ptr<RedisClient> client =
      NewClient({.address = absl::StrCat("127.0.0.1:", testing::FreePort())}, /*wait_ready=*/false);
  EXPECT_FALSE(client->WaitUntilReady(absl::Milliseconds(100)));
  int64_t start = Now();
  BatchResult result = Await(Start(*client, CommandBatch().Add({"PING"}), Now() + 10000000));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_LT(result.completed_us - start, 1000000);
}

// Verifies a standalone Redis reached over a unix domain socket (envoyproxy/ratelimit's default
// REDIS_SOCKET_TYPE): commands and the handshake's AUTH work as over TCP.
TEST_F(RedisClientTest, ConnectsOverUnixSocket) {
  testing::TempDir dir;
  const std::string socket = dir.path() + "/redis.sock";
  std::unique_ptr<RedisServer> server = StartServer(
      {.password = "pw", .extra_config = {"unixsocket " + socket, "unixsocketperm 700"}});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RedisClient> client = NewClient({.address = "unix:" + socket, .password = "pw"});
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->address(), "unix:" + socket);
  BatchResult result = RunOne(*client, {"SET", "unix:key", "v"});
  ASSERT_TRUE(result.status.ok()) << result.status;
  absl::StatusOr<std::string> value = server->Command({"GET", "unix:key"});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "v");
}

// Verifies a unix socket nobody listens on fails fast, like a closed TCP port, and an address
// without a path is refused at creation.
TEST_F(RedisClientTest, MissingUnixSocketFailsFast) {
  testing::TempDir dir;
  std::unique_ptr<RedisClient> client =
      NewClient({.address = "unix:" + dir.path() + "/none.sock"}, /*wait_ready=*/false);
  EXPECT_FALSE(client->WaitUntilReady(absl::Milliseconds(100)));
  int64_t start = Now();
  BatchResult result = Await(Start(*client, CommandBatch().Add({"PING"}), Now() + 10000000));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_LT(result.completed_us - start, 1000000);
  EXPECT_EQ(RedisClient::Create({.address = "unix:"}, clock_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Verifies the deadline edge cases: already passed, and an empty batch.
TEST_F(RedisClientTest, PastDeadlineAndEmptyBatch) {
  std::unique_ptr<RedisClient> client = NewClient();
  BatchResult late = Await(Start(*client, CommandBatch().Add({"PING"}), Now() - 1));
  EXPECT_EQ(late.status.code(), absl::StatusCode::kDeadlineExceeded) << late.status;
  BatchResult empty = Run(*client, CommandBatch());
  EXPECT_TRUE(empty.status.ok()) << empty.status;
  EXPECT_TRUE(empty.replies.empty());
}

// Verifies a batch that would exceed the in-flight bound fails fast instead of queueing.
TEST_F(RedisClientTest, BoundsCommandsInFlight) {
  std::unique_ptr<RedisClient> client = NewClient({.max_pending_commands = 10});
  CommandBatch big;
  for (int i = 0; i < 11; ++i) {
    big.Add({"PING"});
  }
  EXPECT_EQ(Run(*client, std::move(big)).status.code(), absl::StatusCode::kUnavailable);
  CommandBatch fits;
  for (int i = 0; i < 10; ++i) {
    fits.Add({"PING"});
  }
  EXPECT_TRUE(Run(*client, std::move(fits)).status.ok());
}

// Verifies Stop fails what is pending with kUnavailable, and Execute after Stop fails inline.
TEST_F(RedisClientTest, StopFailsPendingAndLaterBatches) {
  std::unique_ptr<RedisClient> client = NewClient();
  server_->Pause();
  std::shared_ptr<PendingResult> pending =
      Start(*client, CommandBatch().Add({"PING"}), Now() + 30000000);
  client->Stop();
  ASSERT_TRUE(pending->done.HasBeenNotified());
  EXPECT_EQ(pending->result.status.code(), absl::StatusCode::kUnavailable);
  server_->Resume();

  bool called = false;
  absl::Status status;
  client->Execute(CommandBatch().Add({"PING"}), Now() + 1000000,
                  [&](absl::Status s, absl::Span<RedisReply>) {
                    called = true;
                    status = s;
                  });
  EXPECT_TRUE(called) << "after Stop the callback runs inline";
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  client->Stop();  // idempotent
}

// Verifies the cluster shape: clients of two nodes share caller-owned loops and one script
// cache, and going away leaves the loops running.
TEST_F(RedisClientTest, ClientsShareLoopsAndScripts) {
  std::unique_ptr<RedisServer> other = StartServer({});
  ASSERT_NE(other, nullptr);
  std::vector<std::unique_ptr<EventLoop>> loops;
  for (int i = 0; i < 2; ++i) {
    loops.push_back(*EventLoop::Create(absl::StrCat("shared-", i)));
  }
  auto scripts = std::make_shared<ScriptCache>();
  const RedisScript* script = *scripts->Register("incrby", kIncrByScript);
  RedisClientResources resources{.loops = {loops[0].get(), loops[1].get()}, .scripts = scripts};
  std::unique_ptr<RedisClient> a = NewClient({}, true, resources);
  std::unique_ptr<RedisClient> b = NewClient({.address = other->address()}, true, resources);
  EXPECT_EQ(a->stats().connections, 2);
  for (RedisClient* client : {a.get(), b.get()}) {
    BatchResult result = Run(*client, CommandBatch().AddEvalSha(*script, {"shared"}, {"7"}));
    ASSERT_TRUE(result.status.ok()) << result.status;
    EXPECT_THAT(result.replies, ElementsAre(RedisReply::Integer(7)));
  }
  a.reset();
  b.reset();
  Notification still_running;
  ASSERT_TRUE(loops[0]->Post([&] { still_running.Notify(); }));
  EXPECT_TRUE(still_running.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// Verifies bad options are refused up front.
TEST_F(RedisClientTest, RejectsBadOptions) {
  std::vector<RedisClientOptions> bad = {
      {.address = "nohost"},
      {.address = "127.0.0.1:"},
      {.address = "127.0.0.1:70000"},
      {.address = "[::1:6379"},
      {.address = "127.0.0.1:6379", .io_threads = 0},
      {.address = "127.0.0.1:6379", .connections_per_thread = 0},
      {.address = "127.0.0.1:6379", .db = -1},
      {.address = "127.0.0.1:6379", .username = "alice"},
      {.address = "127.0.0.1:6379",
       .backoff_min = absl::Seconds(2),
       .backoff_max = absl::Seconds(1)},
      {.address = "127.0.0.1:6379", .caller_write_horizon = absl::Milliseconds(-1)},
  };
  for (const RedisClientOptions& options : bad) {
    EXPECT_EQ(RedisClient::Create(options, clock_).status().code(),
              absl::StatusCode::kInvalidArgument)
        << options.address;
  }
  EXPECT_TRUE(RedisClient::Create({.address = "[::1]:6379"}, clock_).ok());
}

}  // namespace
}  // namespace sluice
