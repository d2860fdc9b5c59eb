#include "server/backend/lease_table.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

constexpr int64_t kStart = 1'700'000'000'000'000;

LimitParams TokenBucket(uint64_t limit = 100'000, uint64_t burst = 100'000) {
  LimitParams params;
  params.algorithm = Algorithm::kTokenBucket;
  params.limit = limit;
  params.period_us = 1'000'000;
  params.burst = burst;
  return params;
}

LimitCheck Check(absl::string_view key, LimitParams params, uint64_t hits = 1) {
  LimitCheck check;
  check.key = key;
  check.params = params;
  check.hits = hits;
  return check;
}

Decision Said(uint64_t remaining, int64_t at_us) {
  Decision decision;
  decision.allowed = true;
  decision.remaining = remaining;
  decision.reset_after_us = 1'000;
  decision.at_us = at_us;
  return decision;
}

class LeaseTableTest : public ::testing::Test {
 protected:
  LeaseOptions Options() {
    LeaseOptions options;
    options.hot_rate = 1'000;  // 100 a tick of 100 ms
    options.window = absl::Milliseconds(20);
    options.life = absl::Milliseconds(100);
    options.max_share = 0.5;
    options.replicas = 2;
    return options;
  }

  // Admits `checks` once at `now`; the asks, returns and tracked checks it named.
  bool Admit(LeaseTable& table, const std::vector<LimitCheck>& checks, int64_t now) {
    decisions.assign(checks.size(), Decision{});
    asks.clear();
    returns.clear();
    tracked.clear();
    return table.Admit(checks, now, absl::MakeSpan(decisions), &asks, &returns, &tracked);
  }

  // Drives `key` at 1 decision per 100 us (10,000/s) for `n` decisions from `now`, telling the
  // table what Redis said of each one that went to Redis; returns the time after.
  int64_t Drive(LeaseTable& table, const LimitCheck& check, int n, int64_t now,
                uint64_t redis_remaining = 50'000) {
    for (int i = 0; i < n; ++i, now += 100) {
      if (!Admit(table, {check}, now) && !tracked.empty()) {
        table.Observed(check.key, check.params, Said(redis_remaining, now));
      }
      pending.insert(pending.end(), asks.begin(), asks.end());
    }
    return now;
  }

  // Makes `check`'s key hot, from the start of a tick, and grants the lease it asks for (the last
  // in `pending`); the time after.
  int64_t Leased(LeaseTable& table, const LimitCheck& check) {
    const int64_t now =
        Drive(table, check, 150, kStart / LeaseTable::kTickUs * LeaseTable::kTickUs);
    EXPECT_FALSE(pending.empty());
    if (!pending.empty()) table.Granted(pending.back(), Said(1'000, now), now);
    return now;
  }

  std::vector<Decision> decisions;
  std::vector<LeaseAsk> asks;
  std::vector<LeaseReturn> returns;
  LeaseTable::Tracked tracked;
  // The asks Drive saw.
  std::vector<LeaseAsk> pending;
};

// Verifies a cold key is never tracked nor leased, and that leases are off at rate 0.
TEST_F(LeaseTableTest, ColdKeysAndRateZeroTakeNoLease) {
  LeaseTable off(LeaseOptions{});
  EXPECT_FALSE(off.enabled());
  LeaseTable table(Options());
  const LimitCheck check = Check("cold", TokenBucket());
  // 99 decisions in one tick: under the 100 that make it hot.
  for (int i = 0; i < 99; ++i) {
    EXPECT_FALSE(Admit(table, {check}, kStart + i * 1'000));
    EXPECT_TRUE(tracked.empty());
    EXPECT_TRUE(asks.empty());
  }
}

// Verifies a key becomes hot at its 100th decision in a tick, asks for a lease only once Redis
// has said what remains, sized to the window of its rate and capped by its share of what
// remains, one ask in flight; once granted, requests are decided from it without Redis.
TEST_F(LeaseTableTest, HotKeyLeasesItsRateAndDecidesFromTheLease) {
  LeaseTable table(Options());
  const LimitCheck check = Check("hot", TokenBucket());
  const int64_t tick = kStart / LeaseTable::kTickUs * LeaseTable::kTickUs;
  int64_t now = tick;
  for (int i = 0; i < 99; ++i, now += 100) Admit(table, {check}, now);
  EXPECT_FALSE(Admit(table, {check}, now));
  ASSERT_EQ(tracked, LeaseTable::Tracked{0});
  EXPECT_TRUE(asks.empty()) << "no lease before Redis has said what remains";
  table.Observed(check.key, check.params, Said(50'000, now));
  now += 100;
  EXPECT_FALSE(Admit(table, {check}, now));
  ASSERT_EQ(asks.size(), 1u);
  // 101 decisions so far in this tick (10 ms at 1e6/s per tick count... read as 1,010/s):
  // 20 ms of it is 21 units (the cap, 50,000 x 0.5 / 2, is far above).
  EXPECT_EQ(asks[0].hits, 21u);
  EXPECT_EQ(asks[0].params.charge, Charge::kIfAdmitted);
  const LeaseAsk ask = asks[0];
  now += 100;
  EXPECT_FALSE(Admit(table, {check}, now));
  EXPECT_TRUE(asks.empty()) << "one ask in flight";
  table.Granted(ask, Said(40'000, now), now);
  EXPECT_EQ(table.units_held(), 21u);
  now += 100;
  ASSERT_TRUE(Admit(table, {check}, now));
  EXPECT_TRUE(decisions[0].allowed);
  EXPECT_EQ(decisions[0].remaining, 40'000u + 20u);
  EXPECT_EQ(decisions[0].at_us, now);
  EXPECT_EQ(table.units_held(), 20u);
  EXPECT_EQ(table.counters().decisions, 1u);
}

// Verifies the cap: the replicas together hold at most max_share of what Redis said remains,
// and under 2 units no lease is asked for (the key is decided per request).
TEST_F(LeaseTableTest, LeasesShrinkToTheShareOfWhatRemains) {
  LeaseTable table(Options());
  const LimitCheck check = Check("near", TokenBucket());
  int64_t now = Drive(table, check, 150, kStart / LeaseTable::kTickUs * LeaseTable::kTickUs, 40);
  // 40 remaining x 0.5 / 2 replicas = 10.
  ASSERT_FALSE(pending.empty());
  EXPECT_EQ(pending.back().hits, 10u);
  table.Refused(pending.back(), nullptr);
  table.Observed(check.key, check.params, Said(3, now));
  EXPECT_FALSE(Admit(table, {check}, now));
  EXPECT_TRUE(asks.empty()) << "3 x 0.5 / 2 is under 2 units";
}

// Verifies a lease's unused units are given back once its life is over (at the first decision
// after, whatever its key).
TEST_F(LeaseTableTest, UnusedUnitsGoBackAtTheLeasesEnd) {
  LeaseTable table(Options());
  const LimitCheck check = Check("ends", TokenBucket());
  const int64_t now = Leased(table, check);
  ASSERT_FALSE(pending.empty());
  const uint64_t granted = pending.back().hits;
  ASSERT_TRUE(Admit(table, {check}, now + 1'000));
  // 100 ms after the grant: the rest goes back.
  EXPECT_FALSE(Admit(table, {Check("other", TokenBucket())}, now + 100'000 + LeaseTable::kTickUs));
  ASSERT_EQ(returns.size(), 1u);
  EXPECT_EQ(returns[0].key, "ends");
  EXPECT_EQ(returns[0].hits, granted - 1);
  EXPECT_EQ(table.units_held(), 0u);
  table.Returned(returns[0], true);
  EXPECT_EQ(table.counters().units_returned, granted - 1);
}

// Verifies a reset of a leased key (its storage key, or a window key that begins with it) drops
// the lease's units without a give-back, and drops a grant that was in flight at the reset: the
// units were taken from the state the reset deleted, and giving them back would count them
// against the fresh one.
TEST_F(LeaseTableTest, AResetDropsTheLeaseWithoutAGiveBack) {
  LeaseTable table(Options());
  LimitParams window = TokenBucket();
  window.algorithm = Algorithm::kFixedWindow;
  const LimitCheck reset = Check("sluice:{d|k=v}fw:1", window);
  const LimitCheck kept = Check("sluice:{d|k=w}tb:1", TokenBucket());
  const int64_t now = Leased(table, reset);
  const uint64_t granted = pending.back().hits;
  pending.clear();
  Leased(table, kept);
  ASSERT_EQ(table.units_held(), granted + pending.back().hits);
  table.Forget("sluice:{d|k=v}fw:1:w29588962");
  EXPECT_EQ(table.units_held(), pending.back().hits);
  EXPECT_EQ(table.counters().units_expired, granted);
  EXPECT_FALSE(Admit(table, {reset}, now + 1'000));
  // Past every lease's life: only the kept key's units go back.
  EXPECT_FALSE(Admit(table, {Check("other", TokenBucket())}, now + 200'000 + LeaseTable::kTickUs));
  ASSERT_EQ(returns.size(), 1u);
  EXPECT_EQ(returns[0].key, kept.key);

  // A lease call in flight at a reset: its grant is dropped when it comes, the next one is not.
  LeaseTable fresh(Options());
  pending.clear();
  const int64_t then = Drive(fresh, reset, 150, kStart / LeaseTable::kTickUs * LeaseTable::kTickUs);
  ASSERT_FALSE(pending.empty());
  fresh.ForgetAll();
  fresh.Granted(pending.back(), Said(1'000, then), then);
  EXPECT_EQ(fresh.units_held(), 0u);
  EXPECT_EQ(fresh.counters().units_expired, pending.back().hits);
  pending.clear();
  Drive(fresh, reset, 10, then + 1);
  ASSERT_FALSE(pending.empty());
  fresh.Granted(pending.back(), Said(1'000, then), then);
  EXPECT_EQ(fresh.units_held(), pending.back().hits);
}

// Verifies a request is decided from leases only when every check is: a second check without a
// lease sends the whole request to Redis and leaves the first lease's units where they were.
TEST_F(LeaseTableTest, ARequestIsDecidedWhollyHereOrWhollyInRedis) {
  LeaseTable table(Options());
  const LimitCheck hot = Check("hot", TokenBucket());
  const int64_t now = Leased(table, hot);
  ASSERT_FALSE(pending.empty());
  const uint64_t held = table.units_held();
  LimitCheck cold = Check("cold", TokenBucket());
  cold.group = 1;  // another descriptor's
  EXPECT_FALSE(Admit(table, {hot, cold}, now + 100));
  EXPECT_EQ(table.units_held(), held);
  EXPECT_EQ(tracked, LeaseTable::Tracked{0});
  // A refund and a sliding window log are never leased.
  LimitCheck refund = hot;
  refund.refund = true;
  EXPECT_FALSE(Admit(table, {refund}, now + 200));
  LimitParams log = TokenBucket();
  log.algorithm = Algorithm::kSlidingWindowLog;
  EXPECT_FALSE(Admit(table, {Check("log", log)}, now + 300));
  EXPECT_TRUE(tracked.empty());
  // Alone, the hot check is decided here.
  EXPECT_TRUE(Admit(table, {hot}, now + 400));
  EXPECT_EQ(table.units_held(), held - 1);
}

// Verifies a reload that changes the key's rule ends its lease: the units go back under the old
// rule, and the key starts again under the new one.
TEST_F(LeaseTableTest, AChangedRuleEndsTheLease) {
  LeaseTable table(Options());
  const LimitCheck old_rule = Check("k", TokenBucket(100'000));
  const int64_t now = Leased(table, old_rule);
  ASSERT_FALSE(pending.empty());
  const uint64_t held = table.units_held();
  ASSERT_GT(held, 0u);
  EXPECT_FALSE(Admit(table, {Check("k", TokenBucket(50'000))}, now + 100));
  ASSERT_EQ(returns.size(), 1u);
  EXPECT_EQ(returns[0].params.limit, 100'000u);
  EXPECT_EQ(returns[0].hits, held);
  EXPECT_EQ(table.units_held(), 0u);
}

// Verifies the units a lease admits never exceed what was granted, whatever the requests' hits.
TEST_F(LeaseTableTest, NeverAdmitsMoreThanGranted) {
  LeaseTable table(Options());
  const LimitCheck check = Check("k", TokenBucket());
  int64_t now = Drive(table, check, 150, kStart / LeaseTable::kTickUs * LeaseTable::kTickUs);
  ASSERT_FALSE(pending.empty());
  const LeaseAsk ask = pending.back();
  table.Granted(ask, Said(1'000, now), now);
  uint64_t admitted = 0;
  for (int i = 0; i < 100; ++i) {
    const LimitCheck three = Check("k", TokenBucket(), 3);
    if (Admit(table, {three}, now + 10 + i)) admitted += 3;
    for (const LeaseAsk& more : asks) table.Refused(more, nullptr);
  }
  EXPECT_LE(admitted, ask.hits);
  EXPECT_GT(admitted + 3, ask.hits);
}

// Verifies a fixed window's or sliding-window counter's lease ends with the window it was taken
// in: its units are never admitted in the next window, come back stamped with their window (and
// are not given back once it is over), and a grant for the next window drops units of the last.
TEST_F(LeaseTableTest, AWindowsLeaseEndsWithItsWindow) {
  for (const Algorithm algorithm : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowCounter}) {
    SCOPED_TRACE(static_cast<int>(algorithm));
    pending.clear();
    LeaseTable table(Options());
    LimitParams window = TokenBucket();
    window.algorithm = algorithm;
    window.period_us = 1'000'000;
    const LimitCheck check = Check("fw", window);
    // 20 ms before a window's end.
    const int64_t end = (kStart / 1'000'000 + 1) * 1'000'000;
    int64_t now = Drive(table, check, 150, end - 35'000);
    ASSERT_FALSE(pending.empty());
    Decision said = Said(1'000, now);
    table.Granted(pending.back(), said, now);
    const uint64_t granted = pending.back().hits;
    ASSERT_TRUE(Admit(table, {check}, end - 1));
    // The next window: not from the lease, which is over.
    EXPECT_FALSE(Admit(table, {check}, end + 10));
    ASSERT_EQ(returns.size(), 1u);
    EXPECT_EQ(returns[0].hits, granted - 1);
    EXPECT_EQ(returns[0].at_us, now);
    EXPECT_EQ(table.units_held(), 0u);
    // Not given back: the window is over (a sliding-window counter would take them from the
    // next one).
    EXPECT_TRUE(LeaseTable::WindowEnded(returns[0], end + 10));
    EXPECT_FALSE(LeaseTable::WindowEnded(returns[0], end - 1));

    // A grant planned in one window and arriving with units of the last still held drops them.
    LeaseTable other(Options());
    pending.clear();
    now = Drive(other, check, 150, end - 35'000);
    ASSERT_FALSE(pending.empty());
    other.Granted(pending.back(), Said(1'000, now), now);
    const uint64_t first = pending.back().hits;
    LeaseAsk next = pending.back();
    next.hits = 7;
    other.Granted(next, Said(1'000, end + 5), end + 6);
    EXPECT_EQ(other.counters().units_expired, first);
    EXPECT_EQ(other.units_held(), 7u);
  }
}

// Verifies a lease call granted for part of its units (a fixed window near its limit) holds
// what was granted, counts that as granted, and admits no more than it.
TEST_F(LeaseTableTest, APartialGrantHoldsWhatWasGranted) {
  LeaseTable table(Options());
  LimitParams window = TokenBucket();
  window.algorithm = Algorithm::kFixedWindow;
  const LimitCheck check = Check("fw", window);
  const int64_t now = Drive(table, check, 150, kStart / LeaseTable::kTickUs * LeaseTable::kTickUs);
  ASSERT_FALSE(pending.empty());
  ASSERT_GT(pending.back().hits, 3u);
  Decision said = Said(0, now);
  said.granted = 3;
  table.Granted(pending.back(), said, now);
  EXPECT_EQ(table.units_held(), 3u);
  EXPECT_EQ(table.counters().units_granted, 3u);
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += Admit(table, {check}, now + 1 + i) ? 1 : 0;
  EXPECT_EQ(admitted, 3);
}

// Verifies the table is bounded whatever keys clients send: past max_keys (here 16, one a
// shard), a key as hot as the others is decided per request and never tracked.
TEST_F(LeaseTableTest, HotKeysPastTheBoundAreDecidedPerRequest) {
  LeaseOptions options = Options();
  options.max_keys = 16;
  LeaseTable table(options);
  const int64_t tick = kStart / LeaseTable::kTickUs * LeaseTable::kTickUs;
  std::vector<std::string> keys;
  for (int k = 0; k < 200; ++k) keys.push_back(absl::StrCat("k", k));
  size_t untracked = 0;
  for (const std::string& key : keys) {
    const LimitCheck check = Check(key, TokenBucket());
    for (int i = 0; i < 100; ++i) Admit(table, {check}, tick + i);
    untracked += tracked.empty() ? 1 : 0;
  }
  EXPECT_EQ(table.keys(), 16u);
  EXPECT_EQ(untracked, 200u - 16u);
}

}  // namespace
}  // namespace sluice
