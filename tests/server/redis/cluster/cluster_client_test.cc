#include "server/redis/cluster/cluster_client.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/clock.h"
#include "server/redis/cluster/hash_slot.h"
#include "tests/server/redis/cluster/cluster_test_helpers.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"

namespace sluice {
namespace {

using cluster_test::BatchResult;
using cluster_test::NowUs;
using cluster_test::RunBatch;
using cluster_test::RunOne;
using cluster_test::SlotOwners;
using cluster_test::TagsOn;
using cluster_test::Traffic;
using ::testing::HasSubstr;
using testing::RedisCluster;
using testing::RedisServer;

constexpr char kIncrByScript[] = "return redis.call('INCRBY', KEYS[1], ARGV[1])";

// One cluster for the whole binary: starting six servers is the expensive part. Each test uses
// its own key prefixes and slots, and leaves every slot with one owner.
class ClusterClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start();
    if (cluster.ok()) {
      cluster_ = cluster->release();
    } else {
      start_error_ = new std::string(cluster.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << "cluster did not start: " << *start_error_;
  }

  std::unique_ptr<RedisClusterClient> NewClient(RedisClusterClientOptions options = {},
                                                bool wait_ready = true) {
    if (options.seeds.empty()) {
      options.seeds = cluster_->SeedAddresses();
    }
    absl::StatusOr<std::unique_ptr<RedisClusterClient>> client =
        RedisClusterClient::Create(std::move(options), RealClock::Get());
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) {
      return nullptr;
    }
    if (wait_ready) {
      EXPECT_TRUE((*client)->WaitUntilReady(absl::Seconds(20)));
    }
    return *std::move(client);
  }

  // The value of `key` read straight from the master that owns it.
  std::string ValueOnOwner(const std::string& key) {
    absl::StatusOr<std::string> owner = cluster_->MasterForSlot(HashSlot(key));
    if (!owner.ok()) {
      return owner.status().ToString();
    }
    absl::StatusOr<std::string> value = cluster_->Command(*owner, {"GET", key});
    return value.ok() ? *value : value.status().ToString();
  }

  static RedisCluster* cluster_;
  static std::string* start_error_;
};

RedisCluster* ClusterClientTest::cluster_ = nullptr;
std::string* ClusterClientTest::start_error_ = nullptr;

// Verifies the client learns all three masters, connects to each, and learns their replicas
// (Redis lists a replica in CLUSTER SLOTS once it has replicated something).
TEST_F(ClusterClientTest, LearnsTheTopologyAndConnectsToEveryMaster) {
  std::unique_ptr<RedisClusterClient> client =
      NewClient({.node = {.io_threads = 2, .connections_per_thread = 2}});
  std::shared_ptr<const SlotMap> map = client->slot_map();
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(map->covered_slots(), kClusterSlots);
  ASSERT_EQ(map->nodes().size(), 3u);
  std::vector<std::string> owners = SlotOwners(*cluster_);
  for (int slot = 0; slot < kClusterSlots; slot += 97) {
    EXPECT_EQ(map->nodes()[static_cast<size_t>(map->NodeForSlot(slot))].address,
              owners[static_cast<size_t>(slot)])
        << "slot " << slot;
  }
  EXPECT_EQ(client->ready_connections(), 3 * 2 * 2);

  for (const SlotMap::Node& node : map->nodes()) {
    std::string tag = TagsOn(owners, node.address, "replicated", 1).at(0);
    ASSERT_TRUE(RunOne(*client, {"SET", absl::StrCat("{", tag, "}"), "x"}).code ==
                absl::StatusCode::kOk);
  }
  auto all_replicas_known = [&] {
    map = client->slot_map();
    for (const SlotMap::Node& node : map->nodes()) {
      if (node.replicas.size() != 1) {
        return false;
      }
    }
    return true;
  };
  int64_t deadline = NowUs() + 20000000;
  // Polling: replicas show up as the cluster gossips their offsets; there is no event to await.
  while (!all_replicas_known() && NowUs() < deadline) {
    client->RequestRefresh();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(all_replicas_known()) << map->DebugString();
}

// Verifies keys of many distinct tags land on all three masters, each on the master that
// owns its slot (checked with CLUSTER KEYSLOT and per-node DBSIZE), and a batch spanning all
// masters answers in command order.
TEST_F(ClusterClientTest, SpreadsKeysOverAllMastersAndAnswersInOrder) {
  std::unique_ptr<RedisClusterClient> client = NewClient();
  absl::StatusOr<std::vector<std::string>> masters = cluster_->Masters();
  ASSERT_TRUE(masters.ok()) << masters.status();
  ASSERT_EQ(masters->size(), 3u);
  std::map<std::string, int64_t> size_before;
  for (const std::string& master : *masters) {
    size_before[master] = std::stoll(*cluster_->Command(master, {"DBSIZE"}));
  }

  constexpr int kKeys = 600;
  std::vector<std::string> keys;
  CommandBatch writes;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(absl::StrCat("spread:{tag-", i, "}:k"));
    std::string value = absl::StrCat("v", i);
    writes.Add({"SET", keys.back(), value});
  }
  BatchResult written = RunBatch(*client, std::move(writes));
  ASSERT_TRUE(written.code == absl::StatusCode::kOk) << written.status();
  ASSERT_EQ(written.replies.size(), static_cast<size_t>(kKeys));
  for (const RedisReply& reply : written.replies) {
    ASSERT_EQ(reply, RedisReply::Status("OK"));
  }

  std::vector<std::string> owners = SlotOwners(*cluster_);
  std::map<std::string, int64_t> expected_new;
  for (int i = 0; i < kKeys; ++i) {
    int slot = HashSlot(keys[static_cast<size_t>(i)]);
    ++expected_new[owners[static_cast<size_t>(slot)]];
    if (i % 20 == 0) {
      EXPECT_EQ(*cluster_->KeySlot(keys[static_cast<size_t>(i)]), slot);
      EXPECT_EQ(*cluster_->Command(owners[static_cast<size_t>(slot)],
                                   {"GET", keys[static_cast<size_t>(i)]}),
                absl::StrCat("v", i));
    }
  }
  for (const std::string& master : *masters) {
    EXPECT_GT(expected_new[master], kKeys / 6) << master << " got too few keys";
    EXPECT_EQ(std::stoll(*cluster_->Command(master, {"DBSIZE"})) - size_before[master],
              expected_new[master])
        << master;
  }

  // Reads in reverse, interleaved with commands of other kinds: replies in command order.
  CommandBatch reads;
  for (int i = kKeys - 1; i >= 0; --i) {
    reads.Add({"GET", keys[static_cast<size_t>(i)]});
    if (i % 100 == 0) {
      reads.Add({"PING"});
      reads.Add({"INCR", absl::StrCat("spread:{tag-", i, "}:n")});
    }
  }
  BatchResult read = RunBatch(*client, std::move(reads));
  ASSERT_TRUE(read.code == absl::StatusCode::kOk) << read.status();
  size_t r = 0;
  for (int i = kKeys - 1; i >= 0; --i) {
    ASSERT_EQ(read.replies[r++], RedisReply::String(absl::StrCat("v", i))) << "key " << i;
    if (i % 100 == 0) {
      EXPECT_EQ(read.replies[r++], RedisReply::Status("PONG"));
      EXPECT_EQ(read.replies[r++], RedisReply::Integer(1));
    }
  }
  EXPECT_EQ(r, read.replies.size());
  EXPECT_EQ(client->stats().failed_batches, 0u);
}

// Verifies a small batch with one command per master completes in order, on an I/O thread.
TEST_F(ClusterClientTest, BatchAcrossThreeMastersCompletesInOrder) {
  std::unique_ptr<RedisClusterClient> client = NewClient();
  std::vector<std::string> owners = SlotOwners(*cluster_);
  absl::StatusOr<std::vector<std::string>> masters = cluster_->Masters();
  ASSERT_TRUE(masters.ok());
  CommandBatch batch;
  std::vector<std::string> keys;
  for (const std::string& master : *masters) {
    std::string tag = TagsOn(owners, master, "three", 1).at(0);
    keys.push_back(absl::StrCat("{", tag, "}"));
  }
  batch.Add({"SET", keys[0], "zero"});
  batch.Add({"INCRBY", keys[1], "7"});
  batch.Add({"RPUSH", keys[2], "a", "b"});
  batch.Add({"GET", keys[0]});
  batch.Add({"LRANGE", keys[2], "0", "-1"});
  BatchResult result = RunBatch(*client, std::move(batch));
  ASSERT_TRUE(result.code == absl::StatusCode::kOk) << result.status();
  ASSERT_EQ(result.replies.size(), 5u);
  EXPECT_EQ(result.replies[0], RedisReply::Status("OK"));
  EXPECT_EQ(result.replies[1], RedisReply::Integer(7));
  EXPECT_EQ(result.replies[2], RedisReply::Integer(2));
  EXPECT_EQ(result.replies[3], RedisReply::String("zero"));
  EXPECT_EQ(result.replies[4],
            RedisReply::Array({RedisReply::String("a"), RedisReply::String("b")}));
  EXPECT_NE(result.thread, std::this_thread::get_id());
}

// Verifies real Redis errors (WRONGTYPE, a script's error) are the command's reply, not a
// failure, and EVALSHA works on every master.
TEST_F(ClusterClientTest, RealErrorsAreRepliesAndScriptsRunEverywhere) {
  std::unique_ptr<RedisClusterClient> client = NewClient();
  const RedisScript* incrby = *client->RegisterScript("incrby", kIncrByScript);
  const RedisScript* boom = *client->RegisterScript("boom", "return redis.error_reply('boom')");
  CommandBatch batch;
  batch.Add({"SET", "errors:{a}", "text"});
  batch.Add({"LPUSH", "errors:{a}", "x"});
  batch.AddEvalSha(*boom, {"errors:{b}"}, {});
  for (int i = 0; i < 30; ++i) {
    batch.AddEvalSha(*incrby, {absl::StrCat("errors:{s", i, "}")}, {"3"});
  }
  BatchResult result = RunBatch(*client, std::move(batch));
  ASSERT_TRUE(result.code == absl::StatusCode::kOk) << result.status();
  ASSERT_EQ(result.replies.size(), 33u);
  EXPECT_EQ(result.replies[1].ErrorCode(), "WRONGTYPE");
  EXPECT_TRUE(result.replies[2].is_error());
  EXPECT_THAT(result.replies[2].str(), HasSubstr("boom"));
  for (size_t i = 3; i < 33; ++i) {
    EXPECT_EQ(result.replies[i], RedisReply::Integer(3)) << i;
  }
}

// Verifies a completed slot migration costs no failed command: the first command meets MOVED,
// the map is patched to the new owner at once, and the command succeeds there.
TEST_F(ClusterClientTest, MovedAfterCompletedMigrationCostsNoFailedCommand) {
  std::unique_ptr<RedisClusterClient> client = NewClient();
  std::vector<std::string> owners = SlotOwners(*cluster_);
  const std::string key = "moved:{mv-1}";
  int slot = HashSlot(key);
  std::string from = owners[static_cast<size_t>(slot)];
  absl::StatusOr<std::vector<std::string>> masters = cluster_->Masters();
  ASSERT_TRUE(masters.ok());
  std::string to = (*masters)[0] == from ? (*masters)[1] : (*masters)[0];
  ASSERT_TRUE(RunOne(*client, {"SET", key, "41"}).code == absl::StatusCode::kOk);

  ASSERT_TRUE(cluster_->MoveSlot(slot, to).ok());
  RedisClusterClientStats before = client->stats();
  CommandBatch batch;
  batch.Add({"INCR", key});
  batch.Add({"GET", "moved:{elsewhere}"});
  batch.Add({"INCR", key});
  BatchResult result = RunBatch(*client, std::move(batch));
  ASSERT_TRUE(result.code == absl::StatusCode::kOk) << result.status();
  EXPECT_EQ(result.replies[0], RedisReply::Integer(42));
  EXPECT_EQ(result.replies[2], RedisReply::Integer(43));
  RedisClusterClientStats after = client->stats();
  EXPECT_GE(after.moved - before.moved, 1u);
  EXPECT_EQ(after.failed_batches, 0u);
  std::shared_ptr<const SlotMap> map = client->slot_map();
  EXPECT_EQ(map->nodes()[static_cast<size_t>(map->NodeForSlot(slot))].address, to);
  EXPECT_EQ(ValueOnOwner(key), "43");

  // Later commands go straight to the new owner.
  uint64_t moved = client->stats().moved;
  ASSERT_TRUE(RunOne(*client, {"INCR", key}).code == absl::StatusCode::kOk);
  EXPECT_EQ(client->stats().moved, moved);
  // /metrics says so, and has each node's series.
  std::string text;
  client->AppendClientMetrics(&text);
  EXPECT_NE(text.find(absl::StrCat("sluice_redis_cluster_redirections_total{kind=\"moved\"} ",
                                   moved, "\n")),
            std::string::npos)
      << text;
  std::vector<NodeMetrics> nodes;
  client->CollectNodeMetrics(&nodes);
  EXPECT_GE(nodes.size(), 2u);
}

// Verifies a slot held mid-migration costs no failed command: keys already moved are reached
// through ASK ([ASKING, command] on the target), new keys too, EVALSHA included, and the slot
// map still names the source. Finishing the migration then turns ASK into MOVED, still without
// a failure.
TEST_F(ClusterClientTest, AskDuringMigrationCostsNoFailedCommandAndKeepsTheMap) {
  std::unique_ptr<RedisClusterClient> client = NewClient();
  const RedisScript* incrby = *client->RegisterScript("incrby", kIncrByScript);
  std::vector<std::string> owners = SlotOwners(*cluster_);
  const std::string tag = "{ask-1}";
  int slot = HashSlot(tag);
  std::string from = owners[static_cast<size_t>(slot)];
  absl::StatusOr<std::vector<std::string>> masters = cluster_->Masters();
  ASSERT_TRUE(masters.ok());
  std::string to = (*masters)[2] == from ? (*masters)[1] : (*masters)[2];
  CommandBatch setup;
  for (int i = 0; i < 10; ++i) {
    setup.Add({"SET", absl::StrCat(tag, "old", i), absl::StrCat(i)});
  }
  ASSERT_TRUE(RunBatch(*client, std::move(setup)).code == absl::StatusCode::kOk);

  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to).ok());
  ASSERT_TRUE(cluster_->MigrateSlotKeys(slot, to).ok());
  ASSERT_EQ(*cluster_->Command(from, {"CLUSTER", "COUNTKEYSINSLOT", absl::StrCat(slot)}), "0");

  RedisClusterClientStats before = client->stats();
  CommandBatch batch;
  for (int i = 0; i < 10; ++i) {
    batch.Add({"GET", absl::StrCat(tag, "old", i)});
  }
  batch.Add({"SET", absl::StrCat(tag, "new"), "fresh"});
  batch.AddEvalSha(*incrby, {absl::StrCat(tag, "script")}, {"5"});
  batch.Add({"GET", "ask:{another-slot}"});
  BatchResult result = RunBatch(*client, std::move(batch));
  ASSERT_TRUE(result.code == absl::StatusCode::kOk) << result.status();
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(result.replies[static_cast<size_t>(i)], RedisReply::String(absl::StrCat(i)));
  }
  EXPECT_EQ(result.replies[10], RedisReply::Status("OK"));
  EXPECT_EQ(result.replies[11], RedisReply::Integer(5));
  RedisClusterClientStats during = client->stats();
  EXPECT_GE(during.ask - before.ask, 12u);
  EXPECT_EQ(during.failed_batches, 0u);
  EXPECT_EQ(during.slot_patches, before.slot_patches);
  std::shared_ptr<const SlotMap> map = client->slot_map();
  EXPECT_EQ(map->nodes()[static_cast<size_t>(map->NodeForSlot(slot))].address, from)
      << "ASK must not change the slot map";
  // The new key was written on the target, not the source.
  EXPECT_EQ(*cluster_->Command(to, {"CLUSTER", "COUNTKEYSINSLOT", absl::StrCat(slot)}), "12");

  ASSERT_TRUE(cluster_->FinishSlotMigration(slot, to).ok());
  BatchResult after = RunOne(*client, {"GET", absl::StrCat(tag, "new")});
  ASSERT_TRUE(after.code == absl::StatusCode::kOk) << after.status();
  EXPECT_EQ(after.replies[0], RedisReply::String("fresh"));
  EXPECT_GE(client->stats().moved, during.moved + 1);
  EXPECT_EQ(client->stats().failed_batches, 0u);
}

// Verifies a multi-key command whose keys are split by a migration meets TRYAGAIN, is retried
// with backoff, fails with kUnavailable only once its budget allows no more retries, and
// succeeds once the migration completes.
TEST_F(ClusterClientTest, TryAgainIsRetriedWithinTheBudget) {
  std::unique_ptr<RedisClusterClient> client = NewClient({.max_retries = 100});
  std::vector<std::string> owners = SlotOwners(*cluster_);
  const std::string tag = "{try-1}";
  int slot = HashSlot(tag);
  std::string from = owners[static_cast<size_t>(slot)];
  absl::StatusOr<std::vector<std::string>> masters = cluster_->Masters();
  ASSERT_TRUE(masters.ok());
  std::string to = (*masters)[0] == from ? (*masters)[2] : (*masters)[0];
  std::string a = absl::StrCat(tag, "a");
  std::string b = absl::StrCat(tag, "b");
  CommandBatch setup;
  setup.Add({"SET", a, "1"}).Add({"SET", b, "2"});
  ASSERT_TRUE(RunBatch(*client, std::move(setup)).code == absl::StatusCode::kOk);
  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to).ok());
  // Move only `a`: the slot's keys are split between the two nodes.
  ASSERT_TRUE(*cluster_->Command(from, {"MIGRATE", "127.0.0.1", to.substr(to.rfind(':') + 1), a,
                                        "0", "5000"}) == "OK");

  RedisClusterClientStats before = client->stats();
  BatchResult split = RunOne(*client, {"MGET", a, b}, absl::Milliseconds(300));
  // kUnavailable when the next retry would not fit the budget; kDeadlineExceeded if a retry
  // was sent but its budget ran out on the way (a loaded machine).
  if (split.code == absl::StatusCode::kUnavailable) {
    EXPECT_THAT(split.message, HasSubstr("TRYAGAIN"));
    // Not a connection failure: the node answered, the cluster would not serve the slot.
    EXPECT_EQ(split.reason, FailureReason::kClusterDown);
  } else {
    EXPECT_EQ(split.code, absl::StatusCode::kDeadlineExceeded) << split.status();
  }
  EXPECT_LE(split.completed_us - split.started_us, 300000 + 100000) << "must not hang";
  EXPECT_GE(client->stats().try_again - before.try_again, 2u);

  // Retried until the migration completes within the budget.
  auto pending = cluster_test::PendingBatch::Make();
  CommandBatch mget;
  mget.Add({"MGET", a, b});
  client->Execute(std::move(mget), NowUs() + 20000000, pending->Callback());
  ASSERT_TRUE(cluster_->MigrateSlotKeys(slot, to).ok());
  ASSERT_TRUE(cluster_->FinishSlotMigration(slot, to).ok());
  ASSERT_TRUE(pending->Wait(absl::Seconds(30)));
  BatchResult done = pending->result();
  ASSERT_TRUE(done.code == absl::StatusCode::kOk) << done.status();
  EXPECT_EQ(done.replies[0], RedisReply::Array({RedisReply::String("1"), RedisReply::String("2")}));
}

// Verifies a slot migrated start to finish under steady traffic costs no failed command, and
// every INCR ran exactly once (the counters equal the successful replies).
TEST_F(ClusterClientTest, SlotMigrationUnderTrafficLosesNoCommand) {
  std::unique_ptr<RedisClusterClient> client = NewClient({.node = {.io_threads = 2}});
  std::vector<std::string> owners = SlotOwners(*cluster_);
  const std::string tag = "{live-mig}";
  int slot = HashSlot(tag);
  std::string from = owners[static_cast<size_t>(slot)];
  absl::StatusOr<std::vector<std::string>> masters = cluster_->Masters();
  ASSERT_TRUE(masters.ok());
  std::string to = (*masters)[1] == from ? (*masters)[0] : (*masters)[1];
  constexpr int kKeys = 4;
  auto key = [&](int k) { return absl::StrCat(tag, "n", k); };
  Traffic traffic(*client, 3, absl::Seconds(5), [&](int thread, int64_t seq) {
    CommandBatch batch;
    for (int k = 0; k < kKeys; ++k) {
      batch.Add({"INCR", key(k)});
    }
    batch.Add({"INCR", absl::StrCat("live-mig:{other-", thread, "}")});
    return batch;
  });
  ASSERT_TRUE(traffic.WaitForMore(30, absl::Seconds(20)));
  ASSERT_TRUE(cluster_->BeginSlotMigration(slot, to).ok());
  ASSERT_TRUE(traffic.WaitForMore(30, absl::Seconds(20)));
  ASSERT_TRUE(cluster_->MigrateSlotKeys(slot, to).ok());
  ASSERT_TRUE(traffic.WaitForMore(30, absl::Seconds(20)));
  ASSERT_TRUE(cluster_->FinishSlotMigration(slot, to).ok());
  ASSERT_TRUE(traffic.WaitForMore(30, absl::Seconds(20)));
  traffic.Stop();

  EXPECT_EQ(traffic.hung(), 0);
  int64_t successes = 0;
  for (const Traffic::Outcome& outcome : traffic.outcomes()) {
    ASSERT_TRUE(outcome.result.code == absl::StatusCode::kOk) << outcome.result.status();
    ASSERT_EQ(outcome.result.calls, 1);
    for (const RedisReply& reply : outcome.result.replies) {
      ASSERT_TRUE(reply.is_integer()) << reply.DebugString();
    }
    ++successes;
  }
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(*cluster_->Command(to, {"GET", key(k)}), absl::StrCat(successes)) << key(k);
  }
  RedisClusterClientStats stats = client->stats();
  EXPECT_GT(stats.ask, 0u);
  EXPECT_GT(stats.moved, 0u);
  EXPECT_EQ(stats.failed_batches, 0u);
}

// Verifies SCRIPT FLUSH on every node in the middle of EVALSHA traffic costs no failed command
// and no lost or repeated increment.
TEST_F(ClusterClientTest, ScriptFlushMidTrafficCostsNoFailedEvalSha) {
  std::unique_ptr<RedisClusterClient> client =
      NewClient({.node = {.io_threads = 2, .connections_per_thread = 2}});
  const RedisScript* incrby = *client->RegisterScript("incrby", kIncrByScript);
  constexpr int kKeys = 12;
  auto key = [](int k) { return absl::StrCat("flush:{f", k, "}"); };
  Traffic traffic(*client, 3, absl::Seconds(5), [&](int, int64_t) {
    CommandBatch batch;
    for (int k = 0; k < kKeys; ++k) {
      batch.AddEvalSha(*incrby, {key(k)}, {"1"});
    }
    return batch;
  });
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(traffic.WaitForMore(20, absl::Seconds(20)));
    ASSERT_TRUE(cluster_->ScriptFlushAll().ok());
  }
  ASSERT_TRUE(traffic.WaitForMore(20, absl::Seconds(20)));
  traffic.Stop();
  EXPECT_EQ(traffic.hung(), 0);
  int64_t successes = 0;
  for (const Traffic::Outcome& outcome : traffic.outcomes()) {
    ASSERT_TRUE(outcome.result.code == absl::StatusCode::kOk) << outcome.result.status();
    for (const RedisReply& reply : outcome.result.replies) {
      ASSERT_TRUE(reply.is_integer()) << reply.DebugString();
    }
    ++successes;
  }
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(ValueOnOwner(key(k)), absl::StrCat(successes)) << key(k);
  }
  RedisClusterClientStats stats = client->stats();
  EXPECT_EQ(stats.failed_batches, 0u);
  EXPECT_GT(stats.connections.noscript_retries, 0u) << "the flushes were never noticed";
}

// Verifies Stop while many batches are in flight completes every callback exactly once, with
// OK or kUnavailable, and later Executes fail inline.
TEST_F(ClusterClientTest, StopDuringTrafficCompletesEveryCallbackOnce) {
  std::unique_ptr<RedisClusterClient> client =
      NewClient({.node = {.io_threads = 2, .connections_per_thread = 2}});
  constexpr int kThreads = 3;
  constexpr int kPerThread = 3000;
  std::vector<std::atomic<int>> calls(kThreads * kPerThread);
  std::atomic<int> bad_status{0};
  std::atomic<int> issued{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int id = t * kPerThread + i;
        CommandBatch batch;
        batch.Add({"INCR", absl::StrCat("stop:{", id % 50, "}")});
        batch.Add({"INCR", absl::StrCat("stop:{", (id + 25) % 50, "}")});
        client->Execute(std::move(batch), NowUs() + 10000000,
                        [&, id](absl::Status status, absl::Span<RedisReply> replies) {
                          calls[static_cast<size_t>(id)].fetch_add(1);
                          if (!status.ok() && status.code() != absl::StatusCode::kUnavailable) {
                            bad_status.fetch_add(1);
                          }
                        });
        issued.fetch_add(1);
      }
    });
  }
  while (issued.load() < kThreads * kPerThread / 3) {
    std::this_thread::yield();
  }
  client->Stop();
  for (std::thread& thread : threads) {
    thread.join();
  }
  // Stop has returned and every Execute after it failed inline: nothing can run any more.
  for (size_t id = 0; id < calls.size(); ++id) {
    ASSERT_EQ(calls[id].load(), 1) << "batch " << id;
  }
  EXPECT_EQ(bad_status.load(), 0);
  BatchResult late = RunOne(*client, {"PING"});
  EXPECT_EQ(late.code, absl::StatusCode::kUnavailable);
  EXPECT_EQ(late.thread, std::this_thread::get_id());
}

// Verifies keyless commands are answered by some master.
TEST_F(ClusterClientTest, KeylessCommandsGoToSomeMaster) {
  std::unique_ptr<RedisClusterClient> client = NewClient();
  CommandBatch batch;
  for (int i = 0; i < 6; ++i) {
    batch.Add({"PING"});
  }
  batch.Add({"ECHO", "hi"});
  BatchResult result = RunBatch(*client, std::move(batch));
  ASSERT_TRUE(result.code == absl::StatusCode::kOk) << result.status();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(result.replies[static_cast<size_t>(i)], RedisReply::Status("PONG"));
  }
  EXPECT_EQ(result.replies[6], RedisReply::String("hi"));
}

// Verifies a client whose seeds do not answer fails batches at once with kUnavailable (no
// hang until the deadline), and is not ready.
TEST(ClusterClientNoClusterTest, FailsFastWithoutAnyReachableSeed) {
  int port = testing::FreePort();
  absl::StatusOr<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Create({.seeds = {absl::StrCat("127.0.0.1:", port)},
                                  .node = {.connect_timeout = absl::Milliseconds(200)}},
                                 RealClock::Get());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_FALSE((*client)->WaitUntilReady(absl::Milliseconds(300)));
  EXPECT_EQ((*client)->ready_connections(), 0);
  BatchResult result = RunOne(**client, {"GET", "k"}, absl::Seconds(10));
  EXPECT_EQ(result.code, absl::StatusCode::kUnavailable) << result.status();
  EXPECT_LT(result.completed_us - result.started_us, 2000000);
  EXPECT_NE(result.thread, std::this_thread::get_id()) << "callbacks never run inline";
  EXPECT_GT((*client)->stats().refresh_failures, 0u);
}

// Verifies option validation.
TEST(ClusterClientNoClusterTest, RejectsBadOptions) {
  const Clock& clock = RealClock::Get();
  EXPECT_EQ(RedisClusterClient::Create({}, clock).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(RedisClusterClient::Create({.seeds = {"nohostport"}}, clock).ok());
  // A cluster is reached over TCP; a unix socket seed is refused with a message saying so.
  absl::Status unix_seed = RedisClusterClient::Create({.seeds = {"unix:/run/r.sock"}}, clock)
                               .status();
  EXPECT_EQ(unix_seed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unix_seed.message()), ::testing::HasSubstr("unix sockets are for a "
                                                                     "standalone Redis"));
  EXPECT_FALSE(RedisClusterClient::Create({.seeds = {"h:1"}, .node = {.db = 2}}, clock).ok());
  EXPECT_FALSE(
      RedisClusterClient::Create({.seeds = {"h:1"}, .node = {.io_threads = 0}}, clock).ok());
  EXPECT_FALSE(RedisClusterClient::Create(
                   {.seeds = {"h:1"}, .retry_backoff_min = absl::ZeroDuration()}, clock)
                   .ok());
}

// Verifies a cluster that leaves slots unassigned serves the covered ones and fails commands
// to the others with kUnavailable naming the slot, at once.
TEST(ClusterClientNoClusterTest, UncoveredSlotsFailWithUnavailable) {
  absl::StatusOr<std::unique_ptr<RedisServer>> node =
      RedisServer::Start({.extra_config = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                                           "cluster-require-full-coverage no"}});
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE((*node)->Command({"CLUSTER", "ADDSLOTSRANGE", "0", "8191"}).ok());
  // A master serves only 2 s after it started (CLUSTER_WRITABLE_DELAY); poll until it does.
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<std::string> info = (*node)->Command({"CLUSTER", "INFO"});
    if (info.ok() && info->find("cluster_state:ok") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  absl::StatusOr<std::unique_ptr<RedisClusterClient>> client =
      RedisClusterClient::Create({.seeds = {(*node)->address()}}, RealClock::Get());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->WaitUntilReady(absl::Seconds(20)));
  EXPECT_EQ((*client)->slot_map()->covered_slots(), 8192);
  std::string served = "foo{hello}";  // slot 866
  std::string unserved = "foo";       // slot 12182
  ASSERT_LT(HashSlot(served), 8192);
  ASSERT_GE(HashSlot(unserved), 8192);
  BatchResult ok = RunOne(**client, {"SET", served, "x"}, absl::Seconds(10));
  ASSERT_TRUE(ok.code == absl::StatusCode::kOk) << ok.status();
  BatchResult failed = RunOne(**client, {"GET", unserved}, absl::Seconds(10));
  EXPECT_EQ(failed.code, absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.message, HasSubstr("slot 12182 not served"));
  EXPECT_LT(failed.completed_us - failed.started_us, 1000000);
}

}  // namespace
}  // namespace sluice
