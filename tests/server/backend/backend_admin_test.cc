// The admin API's operations of the Backend contract (Inspect, Reset, and the reset log) on
// every store: one table of cases run against the memory backend, a real Redis and a real Redis
// Cluster (each state a decision left, decoded, equals what the C++ algorithm leaves after the
// same steps), then what only one store has: the key layouts and the log on Redis, memcached's
// window keys and TTLs, and the per-second composite's routing.
#include <atomic>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/algorithm/fixed_window.h"
#include "server/backend/memcached_backend.h"
#include "server/backend/memory_backend.h"
#include "server/backend/per_second_backend.h"
#include "server/backend/redis_backend.h"
#include "server/key/storage_key.h"
#include "server/key/upstream_key.h"
#include "tests/support/fake_clock.h"
#include "tests/support/memcached_server.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/unshared_status.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MemcachedServer;
using testing::RedisCluster;
using testing::RedisServer;

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kStart = 1'700'006'400 * kSecond;  // on a minute and an hour boundary

// ---- Synchronous calls.

absl::Status Evaluate(Backend& backend, const std::vector<LimitCheck>& checks,
                      std::vector<Decision>* out = nullptr) {
  std::promise<absl::Status> done;
  backend.Evaluate(checks, [&](absl::Status status, absl::Span<const Decision> decisions) {
    if (out != nullptr) {
      out->assign(decisions.begin(), decisions.end());
    }
    done.set_value(testing::UnsharedCopy(status));
  });
  return done.get_future().get();
}

// `checks` as lone checks, each a group of its own (consecutive checks of one group id are one
// all-or-nothing group).
std::vector<LimitCheck> Lone(std::vector<LimitCheck> checks) {
  for (size_t i = 0; i < checks.size(); ++i) {
    checks[i].group = static_cast<uint32_t>(i);
  }
  return checks;
}

absl::StatusOr<std::vector<StateReport>> Inspect(Backend& backend,
                                                 const std::vector<LimitCheck>& checks) {
  std::promise<absl::StatusOr<std::vector<StateReport>>> done;
  backend.Inspect(checks, [&](absl::Status status, std::vector<StateReport> reports) {
    if (status.ok()) {
      done.set_value(std::move(reports));
    } else {
      done.set_value(testing::UnsharedCopy(status));
    }
  });
  return done.get_future().get();
}

absl::StatusOr<std::vector<std::string>> Reset(Backend& backend,
                                               const std::vector<LimitCheck>& checks) {
  std::promise<absl::StatusOr<std::vector<std::string>>> done;
  backend.Reset(checks, [&](absl::Status status, std::vector<std::string> deleted) {
    if (status.ok()) {
      done.set_value(std::move(deleted));
    } else {
      done.set_value(testing::UnsharedCopy(status));
    }
  });
  return done.get_future().get();
}

absl::Status Publish(Backend& backend, const std::vector<std::string>& keys) {
  std::promise<absl::Status> done;
  backend.PublishResets(keys,
                        [&](absl::Status status) { done.set_value(testing::UnsharedCopy(status)); });
  return done.get_future().get();
}

absl::StatusOr<ResetLogPage> Read(Backend& backend, const std::string& cursor) {
  std::promise<absl::StatusOr<ResetLogPage>> done;
  backend.ReadResets(cursor, [&](absl::Status status, ResetLogPage page) {
    if (status.ok()) {
      done.set_value(std::move(page));
    } else {
      done.set_value(testing::UnsharedCopy(status));
    }
  });
  return done.get_future().get();
}

// A state's fields as text, doubles to the bit, for comparing two of them.
std::string Describe(const AlgorithmState& state) {
  std::ostringstream out;
  out.precision(17);
  if (const auto* s = std::get_if<FixedWindowState>(&state)) {
    out << "fixed_window start=" << s->window_start_us << " count=" << s->count;
  } else if (const auto* s = std::get_if<SlidingWindowLogState>(&state)) {
    out << "log total=" << s->total;
    for (const auto& [at, hits] : s->entries) {
      out << " " << at << ":" << hits;
    }
  } else if (const auto* s = std::get_if<SlidingWindowCounterState>(&state)) {
    out << "counter start=" << s->window_start_us << " current=" << s->current
        << " previous=" << s->previous;
  } else if (const auto* s = std::get_if<TokenBucketState>(&state)) {
    out << "token_bucket initialized=" << s->initialized << " tokens=" << s->tokens
        << " last=" << s->last_us;
  } else if (const auto* s = std::get_if<LeakyBucketState>(&state)) {
    out << "leaky_bucket level=" << s->level << " last=" << s->last_us;
  } else if (const auto* s = std::get_if<GcraState>(&state)) {
    out << "gcra tat=" << s->tat_us;
  }
  return out.str();
}

std::string Describe(const Decision& d) {
  return absl::StrCat(d.allowed ? "allowed" : "denied", " remaining=", d.remaining,
                      " retry=", d.retry_after_us, " reset=", d.reset_after_us);
}

LimitParams Params(Algorithm algorithm, uint64_t limit, int64_t period_us, uint64_t burst) {
  LimitParams params;
  params.algorithm = algorithm;
  params.limit = limit;
  params.period_us = period_us;
  params.burst = burst;
  return params;
}

// One algorithm's steps (hits at a time after kStart) and when it is inspected.
struct StateCase {
  LimitParams params;
  std::vector<std::pair<int64_t, uint64_t>> steps;
  int64_t inspect_at = 0;
};

std::vector<StateCase> Cases() {
  const int64_t minute = 60 * kSecond;
  return {
      // No denial: on Redis a denied lone fixed window's hits are given back after its answer,
      // so a read right after it may still count them (redis_backend.h).
      {Params(Algorithm::kFixedWindow, 4, minute, 4), {{1, 1}, {2, 2}, {3, 1}}, 10 * kSecond},
      {Params(Algorithm::kSlidingWindowLog, 4, minute, 4),
       {{1, 1}, {5 * kSecond, 2}, {6 * kSecond, 2}},
       20 * kSecond},
      {Params(Algorithm::kSlidingWindowCounter, 5, minute, 5),
       {{1, 3}, {61 * kSecond, 2}, {62 * kSecond, 1}},
       70 * kSecond},
      {Params(Algorithm::kTokenBucket, 5, kSecond, 10), {{1, 7}, {333333, 4}, {500000, 3}},
       700000},
      {Params(Algorithm::kLeakyBucket, 5, kSecond, 10), {{1, 7}, {333333, 4}}, 600000},
      {Params(Algorithm::kGcra, 5, kSecond, 10), {{1, 6}, {250000, 5}}, 400000},
      {Params(Algorithm::kConcurrency, 3, minute, 3), {{1, 1}, {2, 1}, {3, 2}}, 10 * kSecond},
  };
}

// What the C++ algorithm leaves after the case's steps: the state a store must show.
AlgorithmState Replay(const StateCase& c) {
  AlgorithmState state = NewState(c.params.algorithm);
  for (const auto& [at, hits] : c.steps) {
    sluice::Evaluate(c.params, state, kStart + at, hits);
  }
  return state;
}

// ---- The shared table, on every store that keeps every algorithm.

enum class Store { kMemory, kRedis, kCluster };

std::string StoreName(const ::testing::TestParamInfo<Store>& info) {
  switch (info.param) {
    case Store::kMemory:
      return "Memory";
    case Store::kRedis:
      return "Redis";
    case Store::kCluster:
      return "Cluster";
  }
  return "";
}

class BackendAdminTest : public ::testing::TestWithParam<Store> {
 protected:
  static void SetUpTestSuite() {
    auto redis = RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis).release();
    auto cluster = RedisCluster::Start({.masters = 3, .replicas_per_master = 0});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster).release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete redis_;
  }

  void SetUp() override {
    clock_.SetMicros(kStart);
    if (GetParam() == Store::kMemory) {
      backend_ = std::make_unique<MemoryBackend>(clock_);
      return;
    }
    RedisBackendOptions options;
    options.cluster = GetParam() == Store::kCluster;
    if (options.cluster) {
      options.cluster_seeds = cluster_->SeedAddresses();
    } else {
      options.client.address = redis_->address();
    }
    options.key_prefix = "t:";
    options.timeout = absl::Seconds(2);
    options.use_caller_clock = true;
    auto backend = RedisBackend::Create(options, clock_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    ASSERT_TRUE((*backend)->WaitUntilReady(absl::Seconds(10)));
    backend_ = std::move(*backend);
  }

  // A lone check of `params` on the storage key of `name` (in *key_holder, which it views),
  // apart from other tests' keys.
  static LimitCheck Check(const LimitParams& params, const std::string& name,
                          std::string* key_holder, uint64_t hits = 1) {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    *key_holder = StorageKey("t:", "admin", {{test, name}},
                             RuleKeySuffix(params.algorithm, params.period_us / kSecond));
    LimitCheck check;
    check.key = *key_holder;
    check.params = params;
    check.hits = hits;
    return check;
  }

  FakeClock clock_{kStart};
  std::unique_ptr<Backend> backend_;
  static RedisServer* redis_;
  static RedisCluster* cluster_;
};

RedisServer* BackendAdminTest::redis_ = nullptr;
RedisCluster* BackendAdminTest::cluster_ = nullptr;

// Verifies that for every algorithm the state a store shows after a run of decisions is, field
// by field and to the bit, what the C++ algorithm left after the same steps, in a key that lives,
// and that the check of 0 hits is what the algorithm answers on a copy of it.
TEST_P(BackendAdminTest, InspectShowsTheStateEachAlgorithmLeft) {
  for (const StateCase& c : Cases()) {
    const std::string name(AlgorithmName(c.params.algorithm));
    SCOPED_TRACE(name);
    std::string key;
    for (const auto& [at, hits] : c.steps) {
      clock_.SetMicros(kStart + at);
      ASSERT_TRUE(Evaluate(*backend_, {Check(c.params, name, &key, hits)}).ok());
    }
    clock_.SetMicros(kStart + c.inspect_at);
    auto reports = Inspect(*backend_, {Check(c.params, name, &key)});
    ASSERT_TRUE(reports.ok()) << reports.status();
    ASSERT_EQ(reports->size(), 1u);
    const StateReport& report = (*reports)[0];
    ASSERT_FALSE(report.keys.empty());
    EXPECT_TRUE(report.keys[0].exists);
    EXPECT_TRUE(report.keys[0].readable);
    EXPECT_GT(report.keys[0].ttl_ms, 0);
    EXPECT_EQ(report.now_us, kStart + c.inspect_at);
    AlgorithmState expected = Replay(c);
    if (c.params.algorithm == Algorithm::kFixedWindow && GetParam() != Store::kMemory) {
      // On Redis the key names the window; its count is the state.
      std::get<FixedWindowState>(expected).window_start_us =
          FixedWindowAt(c.params, kStart + c.inspect_at).start_us;
    }
    EXPECT_EQ(Describe(report.state), Describe(expected));
    AlgorithmState copy = expected;
    EXPECT_EQ(Describe(report.answer),
              Describe(sluice::Evaluate(c.params, copy, kStart + c.inspect_at, 0)));
  }
}

// Verifies inspecting writes nothing: decisions after it are those without it.
TEST_P(BackendAdminTest, InspectWritesNothing) {
  const LimitParams params = Params(Algorithm::kTokenBucket, 2, 10 * kSecond, 2);
  std::string key;
  const LimitCheck check = Check(params, "bucket", &key);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Inspect(*backend_, {check}).ok());
  }
  std::vector<Decision> decisions;
  ASSERT_TRUE(Evaluate(*backend_, Lone({check, check, check}), &decisions).ok());
  EXPECT_TRUE(decisions[0].allowed);
  EXPECT_TRUE(decisions[1].allowed);
  EXPECT_FALSE(decisions[2].allowed);
}

// Verifies a key never written is shown missing, with a fresh state that admits a full limit.
TEST_P(BackendAdminTest, MissingKeyIsFresh) {
  std::string key;
  auto reports =
      Inspect(*backend_, {Check(Params(Algorithm::kGcra, 5, kSecond, 10), "never", &key)});
  ASSERT_TRUE(reports.ok()) << reports.status();
  EXPECT_FALSE((*reports)[0].keys[0].exists);
  EXPECT_EQ(Describe((*reports)[0].state), Describe(GcraState{}));
  EXPECT_EQ((*reports)[0].answer.remaining, 10u);
}

// Verifies reset deletes the state of every check, names each key that held some, and leaves
// each deciding as a fresh key: a denied key admits again at once.
TEST_P(BackendAdminTest, ResetDeletesEveryRulesState) {
  std::string window_key;
  std::string bucket_key;
  const LimitCheck window =
      Check(Params(Algorithm::kFixedWindow, 1, 60 * kSecond, 1), "window", &window_key);
  const LimitCheck bucket =
      Check(Params(Algorithm::kTokenBucket, 1, 60 * kSecond, 1), "bucket", &bucket_key);
  std::string untouched_key;
  const LimitCheck untouched =
      Check(Params(Algorithm::kSlidingWindowLog, 1, 60 * kSecond, 1), "untouched", &untouched_key);
  std::vector<Decision> decisions;
  ASSERT_TRUE(Evaluate(*backend_, Lone({window, bucket, window, bucket}), &decisions).ok());
  EXPECT_FALSE(decisions[2].allowed);
  EXPECT_FALSE(decisions[3].allowed);
  auto before = Inspect(*backend_, Lone({window, bucket}));
  ASSERT_TRUE(before.ok());
  auto deleted = Reset(*backend_, Lone({window, bucket, untouched}));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre((*before)[0].keys[0].key, (*before)[1].keys[0].key));
  auto after = Inspect(*backend_, Lone({window, bucket}));
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE((*after)[0].keys[0].exists);
  EXPECT_FALSE((*after)[1].keys[0].exists);
  ASSERT_TRUE(Evaluate(*backend_, Lone({window, bucket}), &decisions).ok());
  EXPECT_TRUE(decisions[0].allowed);
  EXPECT_TRUE(decisions[1].allowed);
  auto again = Reset(*backend_, {untouched});
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(*again, IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(EveryStore, BackendAdminTest,
                         ::testing::Values(Store::kMemory, Store::kRedis, Store::kCluster),
                         StoreName);

// ---- Redis only: key layouts, foreign values, long logs, the reset log.

class RedisAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    backend_ = Make(KeyLayout::kSluice);
  }

  std::unique_ptr<RedisBackend> Make(KeyLayout layout) {
    RedisBackendOptions options;
    options.client.address = redis_->address();
    options.key_prefix = "t:";
    options.key_layout = layout;
    options.timeout = absl::Seconds(2);
    options.use_caller_clock = true;
    auto backend = RedisBackend::Create(options, clock_);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EXPECT_TRUE((*backend)->WaitUntilReady(absl::Seconds(5)));
    return std::move(*backend);
  }

  static LimitCheck Check(const std::string& key, const LimitParams& params, uint32_t group = 0) {
    LimitCheck check;
    check.key = key;
    check.params = params;
    check.group = group;
    return check;
  }

  FakeClock clock_{kStart};
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisBackend> backend_;
};

// Verifies that with upstream's key layout a fixed window alone on its descriptor is read from
// upstream's key, one in a group from Sluice's, both keys listed either way, and reset deletes
// both.
TEST_F(RedisAdminTest, UpstreamLayoutListsBothWindowKeys) {
  auto upstream = Make(KeyLayout::kUpstream);
  const std::string key = StorageKey("t:", "d", {{"user", "alice"}}, "fw:60");
  const LimitParams window = Params(Algorithm::kFixedWindow, 5, 60 * kSecond, 5);
  std::string upstream_key;
  ASSERT_TRUE(AppendUpstreamWindowKey(key, "t:", window, kStart, &upstream_key));
  std::string sluice_key;
  AppendFixedWindowKey(key, window, kStart, &sluice_key);

  ASSERT_TRUE(Evaluate(*upstream, {Check(key, window)}).ok());
  auto lone = Inspect(*upstream, {Check(key, window)});
  ASSERT_TRUE(lone.ok()) << lone.status();
  ASSERT_EQ((*lone)[0].keys.size(), 2u);
  EXPECT_EQ((*lone)[0].keys[0].key, upstream_key);
  EXPECT_EQ((*lone)[0].keys[0].role, "upstream_window");
  EXPECT_TRUE((*lone)[0].keys[0].exists);
  EXPECT_EQ((*lone)[0].keys[1].key, sluice_key);
  EXPECT_FALSE((*lone)[0].keys[1].exists);
  EXPECT_EQ(std::get<FixedWindowState>((*lone)[0].state).count, 1u);

  const std::string bucket_key = StorageKey("t:", "d", {{"user", "alice"}}, "tb:1");
  const LimitParams bucket = Params(Algorithm::kTokenBucket, 5, kSecond, 5);
  std::vector<LimitCheck> group = {Check(key, window, 1), Check(bucket_key, bucket, 1)};
  ASSERT_TRUE(Evaluate(*upstream, group).ok());
  auto grouped = Inspect(*upstream, group);
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  EXPECT_EQ((*grouped)[0].keys[0].key, sluice_key);
  EXPECT_EQ(std::get<FixedWindowState>((*grouped)[0].state).count, 1u);
  EXPECT_EQ((*grouped)[0].keys[1].key, upstream_key);

  auto deleted = Reset(*upstream, {Check(key, window)});
  ASSERT_TRUE(deleted.ok());
  EXPECT_THAT(*deleted, ElementsAre(upstream_key, sluice_key));
}

// Verifies a value that is not the algorithm's state (another algorithm's, or another type) is
// shown as there but unreadable, and decided as a fresh key.
TEST_F(RedisAdminTest, ForeignValuesAreUnreadable) {
  const std::string string_key = StorageKey("t:", "d", {{"k", "string"}}, "tb:1");
  const std::string set_key = StorageKey("t:", "d", {{"k", "set"}}, "gcra:1");
  ASSERT_TRUE(redis_->Command({"SET", string_key, "garbage"}).ok());
  ASSERT_TRUE(redis_->Command({"SADD", set_key, "x"}).ok());
  const std::string log_key = StorageKey("t:", "d", {{"k", "log"}}, "swl:1");
  ASSERT_TRUE(redis_->Command({"SET", log_key, "garbage"}).ok());
  auto reports =
      Inspect(*backend_, {Check(string_key, Params(Algorithm::kTokenBucket, 5, kSecond, 10)),
                          Check(set_key, Params(Algorithm::kGcra, 5, kSecond, 10)),
                          Check(log_key, Params(Algorithm::kSlidingWindowLog, 5, kSecond, 5))});
  ASSERT_TRUE(reports.ok()) << reports.status();
  for (const StateReport& report : *reports) {
    EXPECT_TRUE(report.keys[0].exists);
    EXPECT_FALSE(report.keys[0].readable);
  }
  EXPECT_EQ(Describe((*reports)[0].state), Describe(TokenBucketState{}));
  EXPECT_EQ((*reports)[0].answer.remaining, 10u);
  EXPECT_EQ(Describe((*reports)[2].state), Describe(SlidingWindowLogState{}));
}

// Verifies a sliding window log longer than Inspect reads is shown by its newest entries, with
// a note saying how many it holds.
TEST_F(RedisAdminTest, LongLogIsReadInPart) {
  const std::string key = StorageKey("t:", "d", {{"k", "long"}}, "swl:3600");
  const size_t entries = RedisBackend::kMaxInspectedLogEntries + 10;
  // The log's own form (lua/sliding_window_log.lua): member pack("<dd", ts, cum_after), score
  // cum_before.
  ASSERT_TRUE(redis_
                  ->Command({"EVAL",
                             "for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], i - 1, "
                             "struct.pack('<dd', tonumber(ARGV[2]) + i, i)) end "
                             "redis.call('PEXPIRE', KEYS[1], 3600000)",
                             "1", key, absl::StrCat(entries), absl::StrCat(kStart - 100000)})
                  .ok());
  const LimitParams params = Params(Algorithm::kSlidingWindowLog, 100000, 3600 * kSecond, 100000);
  auto reports = Inspect(*backend_, {Check(key, params)});
  ASSERT_TRUE(reports.ok()) << reports.status();
  const StateReport& report = (*reports)[0];
  EXPECT_THAT(report.keys[0].note, HasSubstr(absl::StrCat("holds ", entries, " entries")));
  const auto& log = std::get<SlidingWindowLogState>(report.state);
  EXPECT_EQ(log.entries.size(), RedisBackend::kMaxInspectedLogEntries);
  EXPECT_EQ(log.entries.back().first, kStart - 100000 + static_cast<int64_t>(entries));
}

// Verifies the reset log: a reader starts at its end, reads the keys published since, in order,
// and then nothing more; trimmed past its place, or given a key too long to log, it is told
// resets were lost.
TEST_F(RedisAdminTest, ResetLogTellsReadersWhatWasReset) {
  auto start = Read(*backend_, "");
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_FALSE(start->cursor.empty());
  EXPECT_THAT(start->keys, IsEmpty());
  ASSERT_TRUE(Publish(*backend_, {"t:{d|a=1}fw:60", "t:{d|b=2}tb:1"}).ok());
  auto page = Read(*backend_, start->cursor);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(page->keys, ElementsAre("t:{d|a=1}fw:60", "t:{d|b=2}tb:1"));
  EXPECT_FALSE(page->lost);
  auto nothing = Read(*backend_, page->cursor);
  ASSERT_TRUE(nothing.ok());
  EXPECT_THAT(nothing->keys, IsEmpty());
  EXPECT_FALSE(nothing->lost);
  EXPECT_EQ(nothing->cursor, page->cursor);

  ASSERT_TRUE(Publish(*backend_, {std::string(RedisBackend::kMaxLoggedKeyBytes + 1, 'k')}).ok());
  auto too_long = Read(*backend_, nothing->cursor);
  ASSERT_TRUE(too_long.ok());
  EXPECT_TRUE(too_long->lost);

  std::vector<std::string> many(RedisBackend::kResetLogEntries, "t:{d|c=3}fw:60");
  ASSERT_TRUE(Publish(*backend_, many).ok());
  auto trimmed = Read(*backend_, too_long->cursor);
  ASSERT_TRUE(trimmed.ok());
  EXPECT_TRUE(trimmed->lost);
  EXPECT_EQ(trimmed->keys.size(), RedisBackend::kResetLogEntries);
  EXPECT_EQ(*redis_->Command({"XLEN", "t:{sluice_reset_log}"}),
            absl::StrCat(RedisBackend::kResetLogEntries));
}

// Verifies the reset log on a Redis Cluster: one key, so one node, whatever the keys it names.
TEST(RedisClusterAdminTest, ResetLogWorksOnACluster) {
  auto cluster = RedisCluster::Start({.masters = 3, .replicas_per_master = 0});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  FakeClock clock(kStart);
  RedisBackendOptions options;
  options.cluster = true;
  options.cluster_seeds = (*cluster)->SeedAddresses();
  options.key_prefix = "t:";
  options.timeout = absl::Seconds(2);
  options.use_caller_clock = true;
  auto backend = RedisBackend::Create(options, clock);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->WaitUntilReady(absl::Seconds(10)));
  auto start = Read(**backend, "");
  ASSERT_TRUE(start.ok()) << start.status();
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) {
    keys.push_back(absl::StrCat("t:{d|user=", i, "}fw:60"));  // over many slots
  }
  ASSERT_TRUE(Publish(**backend, keys).ok());
  auto page = Read(**backend, start->cursor);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->keys, keys);
  EXPECT_FALSE(page->lost);
}

// ---- memcached: fixed windows under upstream's keys.

class MemcachedAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      auto server = MemcachedServer::Start();
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
    MemcachedBackendOptions options;
    for (const auto& server : servers_) {
      options.client.servers.push_back(server->address());
    }
    options.timeout = absl::Milliseconds(500);
    options.key_prefix = "t:";
    auto backend = MemcachedBackend::Create(options, clock_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    ASSERT_TRUE((*backend)->WaitUntilReady(absl::Seconds(5)));
    backend_ = std::move(*backend);
  }

  // Wall time the test sets (windows), real monotonic time (the client's deadlines).
  class WallClock final : public Clock {
   public:
    int64_t NowMicros() const override { return now_.load(); }
    int64_t MonotonicMicros() const override { return RealClock::Get().MonotonicMicros(); }
    std::atomic<int64_t> now_{kStart + 10 * kSecond};
  };

  WallClock clock_;
  std::vector<std::unique_ptr<MemcachedServer>> servers_;
  std::unique_ptr<MemcachedBackend> backend_;
};

// Verifies memcached shows a window's count under upstream's key with its TTL, reset deletes it
// (a key admits again), and a rule memcached cannot keep is refused.
TEST_F(MemcachedAdminTest, InspectsAndResetsWindows) {
  const std::string storage_key = StorageKey("t:", "d", {{"user", "alice"}}, "fw:60");
  LimitCheck check;
  check.key = storage_key;
  check.params = Params(Algorithm::kFixedWindow, 2, 60 * kSecond, 2);
  std::vector<Decision> decisions;
  ASSERT_TRUE(Evaluate(*backend_, Lone({check, check, check}), &decisions).ok());
  EXPECT_FALSE(decisions[2].allowed);
  // The denied hit is given back after its answer (memcached_backend.h): wait for it.
  absl::StatusOr<std::vector<StateReport>> reports;
  for (int i = 0; i < 100; ++i) {
    reports = Inspect(*backend_, {check});
    ASSERT_TRUE(reports.ok()) << reports.status();
    if (std::get<FixedWindowState>((*reports)[0].state).count == 2) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  const StoredKey& key = (*reports)[0].keys[0];
  EXPECT_EQ(key.key, MemcachedBackend::WindowKey(storage_key, "t:", check.params,
                                                 clock_.NowMicros()));
  EXPECT_EQ(key.role, "upstream_window");
  EXPECT_TRUE(key.exists);
  // The rest of the window (50 s) and memcached's extra second, in whole seconds.
  EXPECT_GE(key.ttl_ms, 49000);
  EXPECT_LE(key.ttl_ms, 52000);
  EXPECT_EQ(std::get<FixedWindowState>((*reports)[0].state).count, 2u);
  EXPECT_EQ((*reports)[0].answer.remaining, 0u);

  auto deleted = Reset(*backend_, {check});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre(key.key));
  ASSERT_TRUE(Evaluate(*backend_, {check}, &decisions).ok());
  EXPECT_TRUE(decisions[0].allowed);
  auto again = Reset(*backend_, {check});
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(*again, ElementsAre(key.key));  // the one admitted just now
  auto gone = Reset(*backend_, {check});
  ASSERT_TRUE(gone.ok());
  EXPECT_THAT(*gone, IsEmpty());

  LimitCheck bucket = check;
  bucket.params.algorithm = Algorithm::kTokenBucket;
  EXPECT_EQ(Inspect(*backend_, {bucket}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(backend_->SharesResets());
}

// ---- The per-second composite: each check's state where Evaluate decides it.

// Verifies the composite inspects and resets one-second rules in the per-second store and the
// others in the main one, answering in the caller's order, and keeps the main one's log.
TEST(PerSecondAdminTest, RoutesEachCheckToItsStore) {
  FakeClock clock(kStart);
  auto main_owned = std::make_unique<MemoryBackend>(clock);
  auto per_second_owned = std::make_unique<MemoryBackend>(clock);
  MemoryBackend* main = main_owned.get();
  MemoryBackend* per_second = per_second_owned.get();
  PerSecondBackend backend(std::move(main_owned), std::move(per_second_owned));
  LimitCheck minute;
  minute.key = "t:{d|a=1}fw:60";
  minute.params = Params(Algorithm::kFixedWindow, 5, 60 * kSecond, 5);
  LimitCheck second;
  second.key = "t:{d|a=1}fw:1";
  second.params = Params(Algorithm::kFixedWindow, 5, kSecond, 5);
  second.group = 1;
  ASSERT_TRUE(Evaluate(backend, {second, minute}).ok());
  EXPECT_EQ(main->KeyCount(), 1u);
  EXPECT_EQ(per_second->KeyCount(), 1u);
  auto reports = Inspect(backend, {second, minute});
  ASSERT_TRUE(reports.ok()) << reports.status();
  ASSERT_EQ(reports->size(), 2u);
  EXPECT_EQ((*reports)[0].keys[0].key, "t:{d|a=1}fw:1");
  EXPECT_EQ((*reports)[1].keys[0].key, "t:{d|a=1}fw:60");
  EXPECT_TRUE((*reports)[0].keys[0].exists);
  EXPECT_TRUE((*reports)[1].keys[0].exists);
  auto deleted = Reset(backend, {second, minute});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->size(), 2u);
  EXPECT_EQ(main->KeyCount(), 0u);
  EXPECT_EQ(per_second->KeyCount(), 0u);
  EXPECT_FALSE(backend.SharesResets());
  EXPECT_EQ(Read(backend, "").status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace sluice
