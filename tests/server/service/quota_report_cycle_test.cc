// The quota server (server/quota/quota_server.h) driven by Envoys as client/envoy_quota_model.h
// models them from Envoy's source, on a simulated clock: every request, every report of Envoy's
// 5 s timer (from its first bucket: global_client_impl.cc onSendReportsTimer), every immediate
// report of a new bucket (createBucketImpl), every rebalance of the server (1 s), in time order.
// No process and no network, so minutes of many buckets born at every phase of that timer run
// in a second, exactly: what a bucket admitted, which abandons reached a busy bucket, which
// token buckets Envoy rebuilt.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/envoy_quota_model.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "server/quota/quota_server.h"

namespace sluice {
namespace {

using quota::QuotaOptions;
using quota::QuotaResponse;
using quota::QuotaServer;

constexpr int64_t kSecond = 1'000'000;

constexpr char kConfig[] = R"(domain: sim
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: slow
    rate_limit: {unit: minute, requests_per_unit: 6}
)";

absl::Time At(int64_t us) { return absl::FromUnixMicros(us); }

// The demand exchange of replicas sharing one Redis (server/service/rlqs_exchange.h), in memory:
// each replica's rebalance publishes its streams' demands per bucket and reads the others',
// each entry living 2.5 rebalances.
class SharedDemands {
 public:
  class Replica final : public quota::RemoteDemand {
   public:
    Replica(SharedDemands* shared, int id) : shared_(shared), id_(id) {}
    std::vector<std::optional<std::vector<double>>> Exchange(
        const std::vector<Bucket>& buckets) override {
      std::vector<std::optional<std::vector<double>>> out;
      for (const Bucket& bucket : buckets) {
        const std::string name = bucket.domain + "|" + bucket.key;
        shared_->entries_[{name, id_}] = {bucket.local, shared_->now_us};
        std::vector<double> others;
        for (const auto& [key, entry] : shared_->entries_) {
          if (key.first == name && key.second != id_ &&
              shared_->now_us - entry.second <= 2'500'000) {
            others.insert(others.end(), entry.first.begin(), entry.first.end());
          }
        }
        out.emplace_back(std::move(others));
      }
      return out;
    }

   private:
    SharedDemands* shared_;
    int id_;
  };
  int64_t now_us = 0;

 private:
  std::map<std::pair<std::string, int>, std::pair<std::vector<double>, int64_t>> entries_;
};

// Envoys on quota servers (one, or replicas sharing their demands), on a simulated clock.
class Simulation {
 public:
  explicit Simulation(QuotaOptions options = {}, int replicas = 1) : store_(Load()) {
    for (int r = 0; r < replicas; ++r) {
      if (replicas > 1) {
        remotes_.push_back(std::make_unique<SharedDemands::Replica>(&shared_, r));
      }
      servers_.push_back(std::make_unique<QuotaServer>(
          store_, options, replicas > 1 ? remotes_.back().get() : nullptr));
    }
    fresh_due_.assign(servers_.size(), std::numeric_limits<int64_t>::max());
  }

  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigText("sim.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  // A new Envoy, on replica `replica`; its index.
  size_t AddEnvoy(size_t replica = 0) {
    envoys_.push_back(std::make_unique<Envoy>(EnvoyQuotaModel(EnvoyQuotaProfile::kEnvoy, "sim")));
    envoys_.back()->server = servers_[replica].get();
    envoys_.back()->replica = replica;
    return envoys_.size() - 1;
  }

  // Envoy `envoy` sends `rate` requests a second into bucket {key: value}, evenly spaced, from
  // `from_us` until `to_us`. Its index.
  size_t AddFlow(size_t envoy, const std::string& key, const std::string& value, double rate,
                 int64_t from_us, int64_t to_us) {
    Flow flow;
    flow.envoy = envoy;
    flow.id = EnvoyQuotaModel::MakeBucketId({{key, value}});
    flow.name = absl::StrCat(key, "=", value);
    flow.spacing_us = static_cast<int64_t>(std::llround(1e6 / rate));
    flow.from_us = from_us;
    flow.to_us = to_us;
    flows_.push_back(std::move(flow));
    events_.push({from_us, kArrival, flows_.size() - 1});
    return flows_.size() - 1;
  }

  // Runs every event until `until_us`.
  void Run(int64_t until_us) {
    if (!ticking_) {
      // Each replica's rebalance every second, their timers out of step.
      ticking_ = true;
      for (size_t r = 0; r < servers_.size(); ++r) {
        events_.push({kSecond + static_cast<int64_t>(r) * 333'000, kRebalance, r});
      }
    }
    while (!events_.empty() && std::get<0>(events_.top()) < until_us) {
      const auto [at, kind, index] = events_.top();
      events_.pop();
      now_us_ = at;
      switch (kind) {
        case kArrival: {
          Flow& flow = flows_[index];
          Envoy& envoy = *envoys_[flow.envoy];
          const bool first_ever = envoy.model.NextReportAt() == absl::InfiniteFuture();
          EnvoyQuotaModel::Decision decision = envoy.model.OnRequest(flow.id, At(at));
          (decision.allowed ? flow.admitted : flow.denied)++;
          Perform(flow.envoy, decision.output);
          if (first_ever) {
            ScheduleReport(flow.envoy);
          }
          if (at + flow.spacing_us < flow.to_us) {
            events_.push({at + flow.spacing_us, kArrival, index});
          }
          break;
        }
        case kReport: {
          Envoy& envoy = *envoys_[index];
          Perform(index, envoy.model.Tick(At(at)));
          ScheduleReport(index);
          break;
        }
        case kRebalance:
          shared_.now_us = at;
          servers_[index]->Tick(at);
          Deliver();
          events_.push({at + kSecond, kRebalance, index});
          break;
        case kFresh:
          // A new bucket's early exchange (as RlqsGrpcService's ticker runs it).
          shared_.now_us = at;
          fresh_due_[index] = std::numeric_limits<int64_t>::max();
          servers_[index]->ExchangeFresh(at);
          Deliver();
          ScheduleFresh(index);
          break;
      }
    }
    now_us_ = until_us;
  }

  struct Flow {
    size_t envoy = 0;
    EnvoyQuotaModel::BucketId id;
    std::string name;
    int64_t spacing_us = 0;
    int64_t from_us = 0;
    int64_t to_us = 0;
    uint64_t admitted = 0;
    uint64_t denied = 0;
    uint64_t busy_abandons = 0;  // abandons received while this flow was sending
  };
  const Flow& flow(size_t i) const { return flows_[i]; }
  // What `flows` admitted so far, together.
  uint64_t Admitted(const std::vector<size_t>& flows) const {
    uint64_t admitted = 0;
    for (size_t f : flows) {
      admitted += flows_[f].admitted;
    }
    return admitted;
  }
  size_t flows() const { return flows_.size(); }
  const EnvoyQuotaModel& model(size_t envoy) const { return envoys_[envoy]->model; }
  uint64_t abandons(size_t envoy) const { return envoys_[envoy]->abandons; }
  // Token-bucket assignments received whose fill_interval has nanos (a seconds-only change).
  uint64_t marked_assignments() const { return marked_assignments_; }

 private:
  // At one moment: rebalances, then arrivals, then reports (an arrival at a report's moment is
  // in that report, as RlqsEmulatedEnvoy decides arrivals before a tick that is due).
  enum Kind { kRebalance = 0, kFresh = 1, kArrival = 2, kReport = 3 };
  using Event = std::tuple<int64_t, int, size_t>;  // time, kind, flow or envoy

  struct Envoy {
    explicit Envoy(EnvoyQuotaModel m) : model(std::move(m)) {}
    EnvoyQuotaModel model;
    QuotaServer* server = nullptr;
    size_t replica = 0;
    QuotaServer::StreamId stream = 0;
    bool open = false;
    std::vector<QuotaResponse> inbox;
    uint64_t abandons = 0;
  };

  void ScheduleFresh(size_t server) {
    const int64_t due = servers_[server]->FreshExchangeDueUs();
    if (due < fresh_due_[server]) {
      fresh_due_[server] = due;
      events_.push({std::max(due, now_us_), kFresh, server});
    }
  }

  void ScheduleReport(size_t envoy) {
    const absl::Time next = envoys_[envoy]->model.NextReportAt();
    if (next != absl::InfiniteFuture()) {
      events_.push({absl::ToUnixMicros(next), kReport, envoy});
    }
  }

  // Does what the model asks (open a stream, send a report), then hands every response out.
  void Perform(size_t index, const EnvoyQuotaModel::Output& output) {
    Envoy& envoy = *envoys_[index];
    if (output.new_stream) {
      auto id = envoy.server->Open([&envoy](QuotaResponse r) { envoy.inbox.push_back(std::move(r)); },
                              absl::StrCat("ipv4:10.0.0.", index));
      ASSERT_TRUE(id.ok()) << id.status();
      envoy.stream = *id;
      envoy.open = true;
    }
    if (output.report && envoy.open) {
      const absl::Status status = envoy.server->Report(envoy.stream, *output.report, now_us_);
      EXPECT_TRUE(status.ok()) << status;
      ScheduleFresh(envoy.replica);
    }
    Deliver();
  }

  void Deliver() {
    for (size_t e = 0; e < envoys_.size(); ++e) {
      Envoy& envoy = *envoys_[e];
      std::vector<QuotaResponse> inbox = std::move(envoy.inbox);
      envoy.inbox.clear();
      for (const QuotaResponse& response : inbox) {
        for (const auto& action : response.bucket_action()) {
          if (action.has_abandon_action()) {
            ++envoy.abandons;
            CountBusyAbandon(e, action.bucket_id());
          } else if (action.quota_assignment_action()
                         .rate_limit_strategy()
                         .token_bucket()
                         .fill_interval()
                         .nanos() != 0) {
            ++marked_assignments_;
          }
        }
        envoy.model.OnResponse(response, At(now_us_));
      }
    }
  }

  void CountBusyAbandon(size_t envoy, const EnvoyQuotaModel::BucketId& id) {
    for (Flow& flow : flows_) {
      if (flow.envoy == envoy && flow.from_us <= now_us_ && now_us_ < flow.to_us &&
          id.bucket().size() == flow.id.bucket().size() &&
          id.bucket().begin()->first == flow.id.bucket().begin()->first &&
          id.bucket().begin()->second == flow.id.bucket().begin()->second) {
        ++flow.busy_abandons;
      }
    }
  }

  ConfigStore store_;
  SharedDemands shared_;
  std::vector<std::unique_ptr<SharedDemands::Replica>> remotes_;
  std::vector<std::unique_ptr<QuotaServer>> servers_;
  std::vector<int64_t> fresh_due_;  // per server, the early exchange scheduled
  std::vector<std::unique_ptr<Envoy>> envoys_;
  std::vector<Flow> flows_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  int64_t now_us_ = 0;
  bool ticking_ = false;
  uint64_t marked_assignments_ = 0;
};

// Verifies the issue's case at scale: 1,000 busy buckets over ten Envoys, each bucket's first
// request at a random moment (so its first tick comes anywhere from 0 to 5 s after its
// immediate report), each busy without pause for two minutes: not one abandon reaches a busy
// bucket, and each is held to what it asks. The phases really are spread: hundreds of buckets
// had their first tick less than 1.7 s after their immediate report (the gap that once read as
// the interval and made the next 5 s look like silence).
TEST(QuotaReportCycleTest, BusyBucketsBornAtAnyPhaseAreNeverAbandoned) {
  Simulation sim;
  std::mt19937_64 random(56);
  std::uniform_int_distribution<int64_t> born(0, 60 * kSecond);
  constexpr int kEnvoys = 10;
  constexpr int kBuckets = 1000;
  constexpr int64_t kEnd = 180 * kSecond;
  for (int e = 0; e < kEnvoys; ++e) {
    sim.AddEnvoy();
    // Each Envoy's first bucket starts its timer, at a random moment of the first 5 s.
    sim.AddFlow(e, "tenant", absl::StrCat("first-", e), 2, born(random) / 12, kEnd);
  }
  int short_first_gap = 0;
  for (int b = 0; b < kBuckets; ++b) {
    const int64_t from = 5 * kSecond + born(random);
    sim.AddFlow(b % kEnvoys, "tenant", absl::StrCat("t", b), 2, from, kEnd);
  }
  sim.Run(kEnd);
  uint64_t busy_abandons = 0;
  for (size_t f = 0; f < sim.flows(); ++f) {
    const auto& flow = sim.flow(f);
    busy_abandons += flow.busy_abandons;
    EXPECT_EQ(flow.denied, 0u) << flow.name;  // 2/s of a 100/s bucket: never denied
  }
  EXPECT_EQ(busy_abandons, 0u);
  for (int e = 0; e < kEnvoys; ++e) {
    EXPECT_EQ(sim.abandons(e), 0u) << e;
    // The first tick after a bucket's birth: the Envoy's timer runs every 5 s from its first.
    const auto& first = sim.flow(static_cast<size_t>(e));
    for (size_t f = kEnvoys + static_cast<size_t>(e); f < sim.flows(); f += kEnvoys) {
      const int64_t since_timer = sim.flow(f).from_us - first.from_us;
      const int64_t to_tick = (5 * kSecond - since_timer % (5 * kSecond)) % (5 * kSecond);
      short_first_gap += to_tick < 1'700'000 ? 1 : 0;
    }
  }
  EXPECT_GT(short_first_gap, 250);
}

// Verifies the steady division: eight Envoys asking 5 to 300 a second of one 100/s bucket, their
// timers out of step, each admit their max-min share (5, 10, then 14.2 each) within 3% over the
// minute after a 40 s warm-up.
TEST(QuotaReportCycleTest, SteadyEnvoysEachAdmitTheirShare) {
  Simulation sim;
  const double demands[] = {5, 10, 20, 40, 60, 80, 150, 300};
  const double shares[] = {5, 10, 85.0 / 6, 85.0 / 6, 85.0 / 6, 85.0 / 6, 85.0 / 6, 85.0 / 6};
  std::vector<size_t> flows;
  for (int e = 0; e < 8; ++e) {
    sim.AddEnvoy();
    flows.push_back(sim.AddFlow(e, "tenant", "steady", demands[e], 610'000 * e + 12'345,
                                100 * kSecond));
  }
  sim.Run(40 * kSecond);
  std::vector<uint64_t> before;
  for (size_t f : flows) {
    before.push_back(sim.flow(f).admitted);
  }
  sim.Run(100 * kSecond);
  for (int e = 0; e < 8; ++e) {
    const double rate = static_cast<double>(sim.flow(flows[e]).admitted - before[e]) / 60;
    EXPECT_NEAR(rate / shares[e], 1, 0.03) << demands[e];
  }
}

// Verifies renewals over minutes: three Envoys asking 30, 50 and 70 a second (1.5x) of one
// 100/s bucket for five minutes are held to 0.95-1.05x of the limit, and Envoy never rebuilds a
// token bucket for a renewal (a bucket of the same size and rate as the one it held); on a
// per-minute rule whose shares change in their seconds alone (1 token every 10 s, then every
// 20 s), the renewals after that change are not rebuilt either.
TEST(QuotaReportCycleTest, RenewalsAreNotRebuiltAndABusyBucketIsHeldToItsLimit) {
  Simulation sim;
  constexpr int64_t kEnd = 320 * kSecond;
  constexpr int64_t kFrom = 20 * kSecond;
  const double demands[] = {30, 50, 70};
  std::vector<size_t> flows;
  for (int e = 0; e < 3; ++e) {
    sim.AddEnvoy();
    flows.push_back(sim.AddFlow(e, "tenant", "busy", demands[e], 1'300'000 * e, kEnd));
  }
  // The slow rule: 6 a minute; Envoy 0 alone (1 every 10 s), then with Envoy 1 (1 every 20 s).
  const size_t slow_a = sim.AddFlow(0, "slow", "s", 1, 2 * kSecond, kEnd);
  sim.AddFlow(1, "slow", "s", 1, 40 * kSecond, kEnd);
  sim.Run(kFrom);
  const uint64_t before = sim.Admitted(flows);
  sim.Run(kEnd);
  const uint64_t after = sim.Admitted(flows);
  const uint64_t admitted = after - before;
  const double ratio = static_cast<double>(admitted) / (100.0 * (kEnd - kFrom) / kSecond);
  EXPECT_GE(ratio, 0.95);
  EXPECT_LE(ratio, 1.05);
  uint64_t same = 0;
  for (int e = 0; e < 3; ++e) {
    same += sim.model(e).rebuilds().same_bucket;
  }
  EXPECT_EQ(same, 0u);
  EXPECT_GT(sim.marked_assignments(), 0u);  // a seconds-only change was sent
  // The slow bucket: 6 a minute between the two, over the 4.7 minutes both were there (and
  // Envoy 0's first 38 s alone), with at most the rule's burst over.
  const double slow = static_cast<double>(sim.flow(slow_a).admitted + sim.flow(slow_a + 1).admitted);
  EXPECT_LE(slow, 6.0 * (kEnd - 2 * kSecond) / (60 * kSecond) + 6);
}

// Verifies traffic moving to new buckets throughout: four Envoys (20, 40, 60 and 80 a second,
// 2x the limit) move together to a new 100/s bucket every 10 s plus a random part of 5 s, so
// that each bucket is born at a random phase of each Envoy's timer: over two minutes they admit
// at most 1.05x the limit, and at least 0.9x, on one replica and on three sharing their demand
// (where each replica would divide a new bucket as if alone until their exchange: the early
// exchange of new buckets, QuotaServer::ExchangeFresh).
TEST(QuotaReportCycleTest, TrafficMovingToNewBucketsIsHeldToTheLimit) {
  for (int replicas : {1, 3}) {
    SCOPED_TRACE(absl::StrCat(replicas, " replicas"));
    Simulation sim({}, replicas);
    std::mt19937_64 random(7);
    std::uniform_int_distribution<int64_t> jitter(0, 5 * kSecond);
    constexpr int64_t kEnd = 130 * kSecond;
    constexpr int64_t kFrom = 10 * kSecond;
    const double demands[] = {20, 40, 60, 80};
    std::vector<int64_t> starts;
    for (int e = 0; e < 4; ++e) {
      sim.AddEnvoy(static_cast<size_t>(e % replicas));
      starts.push_back(jitter(random));
    }
    int64_t epoch_from = 0;
    std::vector<size_t> flows;
    for (int epoch = 0; epoch_from < kEnd; ++epoch) {
      const int64_t epoch_to = std::min(kEnd, (epoch + 1) * 10 * kSecond + jitter(random));
      for (int e = 0; e < 4; ++e) {
        flows.push_back(sim.AddFlow(e, "tenant", absl::StrCat("moving-", epoch), demands[e],
                                    std::max(epoch_from, starts[static_cast<size_t>(e)]),
                                    epoch_to));
      }
      epoch_from = epoch_to;
    }
    sim.Run(kFrom);
    const uint64_t before = sim.Admitted(flows);
    sim.Run(kEnd);
    uint64_t after = 0;
    uint64_t busy_abandons = 0;
    for (size_t f : flows) {
      after += sim.flow(f).admitted;
      busy_abandons += sim.flow(f).busy_abandons;
    }
    const uint64_t admitted = after - before;
    const double ratio = static_cast<double>(admitted) / (100.0 * (kEnd - kFrom) / kSecond);
    EXPECT_LE(ratio, 1.05);
    EXPECT_GE(ratio, 0.9);
    EXPECT_EQ(busy_abandons, 0u);
  }
}

// Verifies a newcomer on a bucket whose shares are all held (three Envoys asking 60 a second
// of 100): by default it is admitted from its first moment (its fair share, 25/s, at once, the
// others lowered at once) and everyone's total in that second stays within 1.1x of the limit;
// with newcomer_waits it is denied until the next rebalance, 0.6 s later. Over three replicas
// (the newcomer on the first, with one of the others) the others there learn of it at their
// next rebalance (the early exchange of a new subscriber): within 1.2x in that second.
TEST(QuotaReportCycleTest, ANewcomerIsAdmittedFromItsFirstMoment) {
  for (int replicas : {1, 3}) {
    uint64_t own[2] = {};
    for (bool waits : {false, true}) {
      SCOPED_TRACE(absl::StrCat(replicas, " replicas", waits ? ", newcomer_waits" : ""));
      QuotaOptions options;
      options.newcomer_waits = waits;
      Simulation sim(options, replicas);
      std::vector<size_t> flows;
      for (int e = 0; e < 3; ++e) {
        sim.AddEnvoy(static_cast<size_t>(e % replicas));
        flows.push_back(sim.AddFlow(e, "tenant", "held", 60, 700'000 * e, 60 * kSecond));
      }
      sim.AddEnvoy(0);
      constexpr int64_t kJoin = 30 * kSecond + 400'000;  // 0.4 s after a rebalance
      const size_t newcomer = sim.AddFlow(3, "tenant", "held", 60, kJoin, 60 * kSecond);
      sim.Run(kJoin);
      const uint64_t others_before = sim.Admitted(flows);
      sim.Run(kJoin + 600'000);  // up to the first replica's rebalance
      own[waits] = sim.flow(newcomer).admitted;
      sim.Run(kJoin + kSecond);
      const uint64_t others_after = sim.Admitted(flows);
      const uint64_t all = sim.flow(newcomer).admitted + others_after - others_before;
      EXPECT_LE(all, replicas == 1 ? 110u : 120u);
    }
    EXPECT_GE(own[false], 12u);  // 25/s for 0.6 s, less its first token's wait
    if (replicas == 1) {
      EXPECT_LE(own[true], 1u);  // its first request (no_assignment_behavior), then DENY_ALL
    }
  }
}

}  // namespace
}  // namespace sluice
