#include "server/backend/memcached_backend.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/common/failure_reason.h"
#include "server/key/storage_key.h"
#include "server/memcached/server_placement.h"
#include "tests/support/memcached_server.h"
#include "tests/support/notification.h"

namespace sluice {
namespace {

using testing::MemcachedServer;
using testing::Notification;

constexpr int64_t kSecond = 1'000'000;

// Wall time a test sets (windows), monotonic time real (deadlines).
class WallClock final : public Clock {
 public:
  explicit WallClock(int64_t now_us) : now_(now_us) {}
  int64_t NowMicros() const override { return now_.load(); }
  int64_t MonotonicMicros() const override { return RealClock::Get().MonotonicMicros(); }
  void Set(int64_t now_us) { now_.store(now_us); }

 private:
  std::atomic<int64_t> now_;
};

struct Answer {
  absl::Status status;
  std::vector<Decision> decisions;
};

class MemcachedBackendTest : public ::testing::Test {
 protected:
  static constexpr int64_t kNow = 1'700'000'050 * kSecond;  // 10 s into a minute window

  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      auto server = MemcachedServer::Start();
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
  }

  std::unique_ptr<MemcachedBackend> Make(const Clock& clock) {
    MemcachedBackendOptions options;
    for (const auto& server : servers_) {
      options.client.servers.push_back(server->address());
    }
    options.timeout = absl::Milliseconds(200);
    options.key_prefix = "";
    auto backend = MemcachedBackend::Create(options, clock);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EXPECT_TRUE((*backend)->WaitUntilReady(absl::Seconds(5)));
    return std::move(*backend);
  }

  static LimitParams Window(uint64_t limit, int64_t period_s = 60,
                            Charge charge = Charge::kIfAdmitted) {
    LimitParams params;
    params.algorithm = Algorithm::kFixedWindow;
    params.limit = limit;
    params.period_us = period_s * kSecond;
    params.charge = charge;
    return params;
  }

  static std::string Key(const std::string& value, int64_t period_s = 60) {
    const std::vector<DescriptorEntryView> entries = {{"user", value}};
    return StorageKey("", "api", entries, absl::StrCat("fw:", period_s));
  }

  static Answer Decide(MemcachedBackend& backend, const std::vector<LimitCheck>& checks) {
    Answer answer;
    Notification done;
    backend.Evaluate(checks, [&](absl::Status status, absl::Span<const Decision> decisions) {
      answer.status = std::move(status);
      answer.decisions.assign(decisions.begin(), decisions.end());
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
    return answer;
  }

  // The count of upstream's key for user=`value` in the window of kNow, on its own server.
  int64_t Count(const std::string& value, int64_t window_start_s = 1'700'000'040) {
    const std::string key = absl::StrCat("api_user_", value, "_", window_start_s);
    return servers_[PickServer(key, servers_.size())]->Count(key);
  }

  // Waits for fire-and-forget give-backs to reach the server.
  void SettleCount(const std::string& value, int64_t expected) {
    const absl::Time until = absl::Now() + absl::Seconds(2);
    while (Count(value) != expected && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(2));
    }
  }

  std::vector<std::unique_ptr<MemcachedServer>> servers_;
};

// Verifies a fixed window admits up to its limit, and a denial's hits are given back (the
// counter ends at the limit), as upstream's key on upstream's server.
TEST_F(MemcachedBackendTest, AdmitsUpToTheLimitAndGivesBackDenials) {
  WallClock clock(kNow);
  auto backend = Make(clock);
  const std::string key = Key("alice");
  for (int i = 0; i < 3; ++i) {
    Answer answer = Decide(*backend, {LimitCheck{key, Window(3), 1}});
    ASSERT_TRUE(answer.status.ok()) << answer.status;
    EXPECT_TRUE(answer.decisions[0].allowed);
    EXPECT_EQ(answer.decisions[0].remaining, static_cast<uint64_t>(2 - i));
    EXPECT_EQ(answer.decisions[0].reset_after_us, 50 * kSecond);
  }
  Answer denied = Decide(*backend, {LimitCheck{key, Window(3), 2}});
  ASSERT_TRUE(denied.status.ok());
  EXPECT_FALSE(denied.decisions[0].allowed);
  EXPECT_EQ(denied.decisions[0].retry_after_us, 50 * kSecond);
  SettleCount("alice", 3);
  EXPECT_EQ(Count("alice"), 3);
  // The next window starts from nothing, under its own key.
  clock.Set(kNow + 60 * kSecond);
  EXPECT_TRUE(Decide(*backend, {LimitCheck{key, Window(3), 3}}).decisions[0].allowed);
  EXPECT_EQ(Count("alice", 1'700'000'100), 3);
}

// Verifies a rule that charges always keeps a denial's hits, as upstream's increment-first.
TEST_F(MemcachedBackendTest, ChargeAlwaysKeepsDeniedHits) {
  WallClock clock(kNow);
  auto backend = Make(clock);
  const std::string key = Key("bob");
  for (int i = 0; i < 5; ++i) {
    Decide(*backend, {LimitCheck{key, Window(2, 60, Charge::kAlways), 1}});
  }
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(Count("bob"), 5);
  EXPECT_FALSE(Decide(*backend, {LimitCheck{key, Window(2, 60, Charge::kAlways), 0}})
                   .decisions[0]
                   .allowed);
}

// Verifies refunds as upstream's memcached path gives them back: a decrement floored at 0, a
// missing key left missing; answered allowed with the state after it. A check of 0 hits reads
// without creating.
TEST_F(MemcachedBackendTest, RefundsAndChecksOfNoHits) {
  WallClock clock(kNow);
  auto backend = Make(clock);
  const std::string key = Key("carol");
  ASSERT_TRUE(Decide(*backend, {LimitCheck{key, Window(10), 4}}).status.ok());
  LimitCheck refund{key, Window(10), 3};
  refund.refund = true;
  Answer answer = Decide(*backend, {refund});
  ASSERT_TRUE(answer.status.ok()) << answer.status;
  EXPECT_TRUE(answer.decisions[0].allowed);
  EXPECT_EQ(answer.decisions[0].remaining, 9u);
  EXPECT_EQ(Count("carol"), 1);
  refund.hits = 100;
  Answer all_back = Decide(*backend, {refund});
  ASSERT_TRUE(all_back.status.ok()) << all_back.status;
  EXPECT_EQ(all_back.decisions[0].remaining, 10u);
  EXPECT_EQ(Count("carol"), 0);
  const std::string nobody = Key("nobody");
  LimitCheck missing{nobody, Window(10), 5};
  missing.refund = true;
  Answer nothing = Decide(*backend, {missing});
  ASSERT_TRUE(nothing.status.ok()) << nothing.status;
  EXPECT_TRUE(nothing.decisions[0].allowed);
  EXPECT_EQ(Count("nobody"), -1);
  Answer check = Decide(*backend, {LimitCheck{Key("dave"), Window(10), 0}});
  ASSERT_TRUE(check.status.ok()) << check.status;
  EXPECT_TRUE(check.decisions[0].allowed);
  EXPECT_EQ(check.decisions[0].remaining, 10u);
  EXPECT_EQ(Count("dave"), -1);
}

// Verifies a group consumes all or nothing: when one of its rules denies, the others give
// their hits back.
TEST_F(MemcachedBackendTest, GroupIsAllOrNothing) {
  WallClock clock(kNow);
  auto backend = Make(clock);
  LimitParams minute = Window(5);
  minute.shares_descriptor = true;
  LimitParams hour = Window(2, 3600);
  hour.shares_descriptor = true;
  const std::string minute_storage = Key("erin");
  const std::string hour_storage = Key("erin", 3600);
  const std::vector<LimitCheck> checks = {LimitCheck{minute_storage, minute, 1, 7},
                                          LimitCheck{hour_storage, hour, 1, 7}};
  EXPECT_TRUE(Decide(*backend, checks).decisions[1].allowed);
  EXPECT_TRUE(Decide(*backend, checks).decisions[1].allowed);
  Answer third = Decide(*backend, checks);
  EXPECT_TRUE(third.decisions[0].allowed);
  EXPECT_FALSE(third.decisions[1].allowed);
  const std::string minute_key = "api_user_erin_1700000040_60s";
  const std::string hour_key = "api_user_erin_1699999200_3600s";
  const absl::Time until = absl::Now() + absl::Seconds(2);
  while (servers_[PickServer(minute_key, 3)]->Count(minute_key) != 2 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(servers_[PickServer(minute_key, 3)]->Count(minute_key), 2);
  EXPECT_EQ(servers_[PickServer(hour_key, 3)]->Count(hour_key), 2);
}

// Verifies a limit of 0 needs no server, and a rule of another algorithm is an argument
// failure (decided in process), never the failure policy's.
TEST_F(MemcachedBackendTest, ZeroLimitsAndOtherAlgorithms) {
  WallClock clock(kNow);
  auto backend = Make(clock);
  Answer zero = Decide(*backend, {LimitCheck{Key("zed"), Window(0), 1}});
  ASSERT_TRUE(zero.status.ok());
  EXPECT_FALSE(zero.decisions[0].allowed);
  EXPECT_EQ(Count("zed"), -1);
  LimitParams bucket = Window(5);
  bucket.algorithm = Algorithm::kTokenBucket;
  bucket.burst = 5;
  Answer other = Decide(*backend, {LimitCheck{Key("zed"), bucket, 1}});
  EXPECT_EQ(FailureReasonOf(other.status), FailureReason::kArgument);
}

// Verifies a descriptor memcached cannot take as a key (a space, or past 250 bytes) is kept
// under a hashed key instead of failing.
TEST_F(MemcachedBackendTest, IllegalKeysAreHashed) {
  WallClock clock(kNow);
  auto backend = Make(clock);
  const std::string spaced = Key("with space");
  const std::string long_key = Key(std::string(300, 'x'));
  EXPECT_EQ(MemcachedBackend::WindowKey(spaced, "", Window(1), kNow).size(), 41u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(Decide(*backend, {LimitCheck{spaced, Window(2), 1}}).decisions[0].allowed);
    EXPECT_TRUE(Decide(*backend, {LimitCheck{long_key, Window(2), 1}}).decisions[0].allowed);
  }
  EXPECT_FALSE(Decide(*backend, {LimitCheck{spaced, Window(2), 1}}).decisions[0].allowed);
  EXPECT_FALSE(Decide(*backend, {LimitCheck{long_key, Window(2), 1}}).decisions[0].allowed);
}

// Verifies a server that is down fails its keys' decisions with the connection reason within
// the budget, and decisions go on once it is back (empty: memcached keeps nothing).
TEST_F(MemcachedBackendTest, ServerDownFailsWithItsReason) {
  WallClock clock(kNow);
  auto backend = Make(clock);
  std::string value;
  for (int i = 0; value.empty(); ++i) {
    const std::string candidate = absl::StrCat("u", i);
    if (PickServer(absl::StrCat("api_user_", candidate, "_1700000040"), 3) == 2) {
      value = candidate;
    }
  }
  servers_[2]->Kill();
  absl::SleepFor(absl::Milliseconds(50));
  Answer failed = Decide(*backend, {LimitCheck{Key(value), Window(5), 1}});
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailureReasonOf(failed.status), FailureReason::kConnection);
  EXPECT_FALSE(backend->Ready() && backend->client().ready_servers() == 3);
  ASSERT_TRUE(servers_[2]->Restart().ok());
  ASSERT_TRUE(backend->WaitUntilReady(absl::Seconds(5)));
  const absl::Time until = absl::Now() + absl::Seconds(5);
  Answer back;
  do {
    back = Decide(*backend, {LimitCheck{Key(value), Window(5), 1}});
  } while (!back.status.ok() && absl::Now() < until);
  EXPECT_TRUE(back.status.ok()) << back.status;
  std::string metrics;
  const std::string both_up =
      "sluice_memcached_connections{node=\"" + servers_[2]->address() + "\"} 2";
  const absl::Time connected_by = absl::Now() + absl::Seconds(5);
  do {
    metrics.clear();
    backend->AppendMetrics(&metrics);
  } while (metrics.find(both_up) == std::string::npos && absl::Now() < connected_by &&
           (absl::SleepFor(absl::Milliseconds(10)), true));
  EXPECT_NE(metrics.find("sluice_memcached_connections{node=\"" + servers_[2]->address() +
                         "\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sluice_memcached_servers 3"), std::string::npos);
}

// Verifies three replicas (three backends, each its own client and connections) sharing three
// servers admit exactly the limit of each key in a window, however they race: 3 replicas x 4
// threads offering 3x the limit over 8 keys. Prints the counts.
TEST_F(MemcachedBackendTest, ThreeReplicasAdmitExactlyTheLimit) {
  WallClock clock(kNow);
  std::vector<std::unique_ptr<MemcachedBackend>> replicas;
  for (int r = 0; r < 3; ++r) {
    replicas.push_back(Make(clock));
  }
  constexpr int kKeys = 8;
  constexpr uint64_t kLimit = 100;
  constexpr int kThreadsPerReplica = 4;
  constexpr int kOffersPerThread = kKeys * static_cast<int>(kLimit) * 3 / (3 * kThreadsPerReplica);
  std::atomic<uint64_t> admitted[kKeys] = {};
  std::atomic<uint64_t> failed{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    for (int t = 0; t < kThreadsPerReplica; ++t) {
      threads.emplace_back([&, r, t] {
        for (int i = 0; i < kOffersPerThread; ++i) {
          const int k = (i + t + r) % kKeys;
          Answer answer =
              Decide(*replicas[static_cast<size_t>(r)],
                     {LimitCheck{Key(absl::StrCat("hot", k)), Window(kLimit), 1}});
          if (!answer.status.ok()) {
            failed.fetch_add(1);
          } else if (answer.decisions[0].allowed) {
            admitted[k].fetch_add(1);
          }
        }
      });
    }
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failed.load(), 0u);
  uint64_t total = 0;
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(admitted[k].load(), kLimit) << "key " << k;
    total += admitted[k].load();
    SettleCount(absl::StrCat("hot", k), static_cast<int64_t>(kLimit));
    EXPECT_EQ(Count(absl::StrCat("hot", k)), static_cast<int64_t>(kLimit));
  }
  std::printf("three replicas, three servers: %d offered, %llu admitted (limit %llu x %d keys)\n",
              3 * kThreadsPerReplica * kOffersPerThread,
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(kLimit),
              kKeys);
}

}  // namespace
}  // namespace sluice
