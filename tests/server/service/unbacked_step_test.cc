// In-flight limits across backend failures, through the decision path (RateLimiter): Envoy sends a
// release for every request that ends, whoever answered its acquisition, and a release of an
// acquisition the backend never held must not free a lease that another request holds there.
// A MemoryBackend stands in for Redis, the shared state; a wrapper takes it down, or makes it
// execute a call and report a timeout all the same.
#include "server/service/unbacked_step.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "server/common/failure_reason.h"
#include "server/config/config_loader.h"
#include "server/service/rate_limiter.h"
#include "tests/server/service/request_builder.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using Response = RateLimiter::Response;
using Request = RateLimiter::Request;

constexpr int64_t kMinuteUs = 60'000'000;

constexpr char kConfig[] = R"(domain: edge
descriptors:
  - key: streams
    rate_limit: {algorithm: concurrency, unit: minute, requests_per_unit: 3}
  - key: streams_if_admitted
    rate_limit: {algorithm: concurrency, unit: minute, requests_per_unit: 3, charge: if_admitted}
  - key: log
    rate_limit: {algorithm: sliding_window_log, unit: minute, requests_per_unit: 3}
)";

// The shared state behind a switch: up, it decides; down, it fails every call with `failure`
// without deciding; kExecutedButFailed, it decides (the state changes) and reports `failure`
// all the same, as a call that timed out after Redis had executed it. Records the hits of each
// refund it is sent.
class SwitchedBackend final : public Backend {
 public:
  enum class State { kUp, kDown, kExecutedButFailed };
  explicit SwitchedBackend(Backend& inner) : inner_(inner) {}

  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& /*trace*/,
                EvaluateCallback done) override {
    for (const LimitCheck& check : checks) {
      if (check.refund) {
        refund_hits.push_back(check.hits);
      }
    }
    if (state == State::kDown) {
      std::move(done)(failure, {});
      return;
    }
    if (state == State::kExecutedButFailed) {
      inner_.Evaluate(checks, [](absl::Status, absl::Span<const Decision>) {});
      std::move(done)(failure, {});
      return;
    }
    inner_.Evaluate(checks, std::move(done));
  }
  absl::string_view Name() const override { return "switched"; }

  State state = State::kUp;
  absl::Status failure = absl::UnavailableError("redis 127.0.0.1:6379: not connected");
  std::vector<uint64_t> refund_hits;

 private:
  Backend& inner_;
};

class UnbackedStepTest : public ::testing::Test {
 protected:
  UnbackedStepTest() : store_(Load()), shared_(clock_), backend_(shared_) {}

  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigText("edge.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  // A replica on the shared backend, answering by `mode` what the backend cannot.
  std::unique_ptr<RateLimiter> Replica(FailureMode mode, uint32_t replicas_hint = 1) {
    RateLimiterOptions options;
    options.failure_mode = mode;
    options.replicas_hint = replicas_hint;
    return std::make_unique<RateLimiter>(store_, backend_, clock_, metrics_, options);
  }

  static Response Decide(RateLimiter& replica, const std::string& key, bool release,
                         uint32_t hits = 1) {
    Request request = testing::MakeRequest("edge", {{{key, "u"}}}, hits);
    request.mutable_descriptors(0)->set_is_negative_hits(release);
    auto response = testing::DecideInline(replica, request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : Response();
  }
  static bool Acquire(RateLimiter& replica, const std::string& key = "streams") {
    return Decide(replica, key, false).overall_code() == Response::OK;
  }
  // The release's answer: the key's leases left, as the backend holds them.
  static uint32_t Release(RateLimiter& replica, const std::string& key = "streams",
                          uint32_t hits = 1) {
    Response r = Decide(replica, key, true, hits);
    EXPECT_EQ(r.overall_code(), Response::OK);
    return r.statuses_size() == 1 ? r.statuses(0).limit_remaining() : 0;
  }
  // How many acquisitions in a row the limit admits now (then releases them again).
  int Admits(RateLimiter& replica, const std::string& key = "streams") {
    int admitted = 0;
    while (admitted < 10 && Acquire(replica, key)) {
      ++admitted;
    }
    for (int i = 0; i <= admitted && admitted < 10; ++i) {
      Release(replica, key);  // the admitted ones and the denied one
    }
    return admitted;
  }
  static std::string MetricsOf(const RateLimiter& replica) {
    std::string text;
    replica.AppendMetrics(&text);
    return text;
  }

  FakeClock clock_{1'700'006'400'000'000};
  ConfigStore store_;
  MemoryBackend shared_;
  SwitchedBackend backend_;
  Metrics metrics_;
};

// Verifies the brief's case: three leases held, Redis stops, an acquisition is answered OK by
// failure_mode allow (it holds no lease), Redis is back, and that request's release leaves the
// three real leases alone: it reaches the backend with 0 hits (answered with the state: 0 left)
// and the next acquisition is denied. A real release then frees one.
TEST_F(UnbackedStepTest, ReleaseAfterFailureModeAllowLeavesTheLeasesHeld) {
  auto replica = Replica(FailureMode::kAllow);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Acquire(*replica)) << i;
  }
  backend_.state = SwitchedBackend::State::kDown;
  EXPECT_TRUE(Acquire(*replica));  // by the failure mode
  backend_.state = SwitchedBackend::State::kUp;
  backend_.refund_hits.clear();
  EXPECT_EQ(Release(*replica), 0u);
  EXPECT_THAT(backend_.refund_hits, ::testing::ElementsAre(0u));
  EXPECT_FALSE(Acquire(*replica));
  EXPECT_EQ(Release(*replica), 0u);  // that denial's own release
  EXPECT_EQ(Release(*replica), 1u);  // a running request ends
  EXPECT_TRUE(Acquire(*replica));
  const std::string metrics = MetricsOf(*replica);
  EXPECT_THAT(metrics, HasSubstr("sluice_unbacked_acquisitions_recorded_total 1\n"));
  EXPECT_THAT(metrics, HasSubstr("sluice_unbacked_acquisitions_released_total 1\n"));
  EXPECT_THAT(metrics, HasSubstr("sluice_unbacked_acquisitions_keys 0\n"));
}

// Verifies the same when the outage's answer was a denial (failure_mode deny): the denied
// request's release is Envoy's too, and takes nothing from the backend. Under an explicit
// `charge: if_admitted` a denial holds no lease anywhere, and its release reaches the backend as
// before (it frees a running request's lease).
TEST_F(UnbackedStepTest, ReleaseAfterFailureModeDeny) {
  auto replica = Replica(FailureMode::kDeny);
  backend_.state = SwitchedBackend::State::kDown;
  EXPECT_FALSE(Acquire(*replica));
  EXPECT_FALSE(Acquire(*replica, "streams_if_admitted"));
  backend_.state = SwitchedBackend::State::kUp;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Acquire(*replica)) << i;
    ASSERT_TRUE(Acquire(*replica, "streams_if_admitted")) << i;
  }
  EXPECT_EQ(Release(*replica), 0u);
  EXPECT_FALSE(Acquire(*replica));
  EXPECT_EQ(Release(*replica, "streams_if_admitted"), 1u);
  EXPECT_TRUE(Acquire(*replica, "streams_if_admitted"));
}

// Verifies failure_mode local: the outage's acquisitions hold leases in the local store (3 / 3
// replicas: one lease, and a denial charged past it), their releases after the outage give them
// back to that store, not to the backend, whose leases stay held; in the next outage the local
// store admits its whole share again.
TEST_F(UnbackedStepTest, ReleaseAfterFailureModeLocalGivesBackToTheLocalStore) {
  auto replica = Replica(FailureMode::kLocal, /*replicas_hint=*/3);
  backend_.state = SwitchedBackend::State::kDown;
  EXPECT_TRUE(Acquire(*replica));
  EXPECT_FALSE(Acquire(*replica));  // the local share is full
  backend_.state = SwitchedBackend::State::kUp;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Acquire(*replica)) << i;
  }
  backend_.refund_hits.clear();
  EXPECT_EQ(Release(*replica), 0u);
  EXPECT_EQ(Release(*replica), 0u);
  EXPECT_THAT(backend_.refund_hits, ::testing::ElementsAre(0u, 0u));
  EXPECT_FALSE(Acquire(*replica));
  EXPECT_EQ(Release(*replica), 0u);
  backend_.state = SwitchedBackend::State::kDown;
  EXPECT_TRUE(Acquire(*replica));  // the local store had both given back
  EXPECT_FALSE(Acquire(*replica));
}

// Verifies an acquisition whose call failed although the backend executed it (a node that went
// silent, FailureReason::kTimeoutInFlight, then answered late) holds its lease there while its
// release is taken here: the key admits one fewer until that lease lapses, one unit after it was
// taken, and no longer (the bound on the under-admission).
TEST_F(UnbackedStepTest, TimedOutAcquisitionExecutedAfterAllHoldsItsLeaseForOneUnit) {
  auto replica = Replica(FailureMode::kAllow);
  backend_.failure = WithFailureReason(absl::DeadlineExceededError("no reply before the deadline"),
                                       FailureReason::kTimeoutInFlight);
  backend_.state = SwitchedBackend::State::kExecutedButFailed;
  EXPECT_TRUE(Acquire(*replica));
  backend_.state = SwitchedBackend::State::kUp;
  clock_.AdvanceMicros(kMinuteUs / 2);
  ASSERT_TRUE(Acquire(*replica));
  ASSERT_TRUE(Acquire(*replica));
  EXPECT_EQ(Release(*replica), 0u);  // taken here; the executed lease stays in the backend
  EXPECT_EQ(Admits(*replica), 0);    // two running, yet none admitted
  clock_.AdvanceMicros(kMinuteUs / 2);
  EXPECT_EQ(Admits(*replica), 1);    // the executed lease lapsed
}

// Verifies a call that timed out while its node was answering others (slow, not gone:
// FailureReason::kTimeoutSlow) is not recorded: the node executes it, and the release gives that
// lease back there.
TEST_F(UnbackedStepTest, SlowTimeoutIsNotRecorded) {
  auto replica = Replica(FailureMode::kAllow);
  backend_.failure = WithFailureReason(absl::DeadlineExceededError("slow"),
                                       FailureReason::kTimeoutSlow);
  backend_.state = SwitchedBackend::State::kExecutedButFailed;
  EXPECT_TRUE(Acquire(*replica));
  backend_.state = SwitchedBackend::State::kUp;
  ASSERT_TRUE(Acquire(*replica));
  ASSERT_TRUE(Acquire(*replica));
  backend_.refund_hits.clear();
  EXPECT_EQ(Release(*replica), 1u);
  EXPECT_THAT(backend_.refund_hits, ::testing::ElementsAre(1u));
  EXPECT_THAT(MetricsOf(*replica), HasSubstr("sluice_unbacked_acquisitions_recorded_total 0\n"));
}

// Verifies a release of more hits than the key's unbacked acquisitions sends the rest to the
// backend, and that other algorithms' refunds are never matched.
TEST_F(UnbackedStepTest, ReleaseOfMoreThanUnbackedSendsTheRestToTheBackend) {
  auto replica = Replica(FailureMode::kAllow);
  backend_.state = SwitchedBackend::State::kDown;
  EXPECT_TRUE(Acquire(*replica));
  EXPECT_TRUE(Acquire(*replica, "log"));
  backend_.state = SwitchedBackend::State::kUp;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Acquire(*replica)) << i;
  }
  ASSERT_TRUE(Acquire(*replica, "log"));
  backend_.refund_hits.clear();
  EXPECT_EQ(Release(*replica, "streams", 2), 1u);
  EXPECT_EQ(Release(*replica, "log", 1), 3u);
  EXPECT_THAT(backend_.refund_hits, ::testing::ElementsAre(1u, 1u));
  EXPECT_THAT(MetricsOf(*replica), HasSubstr("sluice_unbacked_acquisitions_recorded_total 1\n"));
}

// Verifies what a replica cannot know, with two replicas on one backend: the release of an
// acquisition that replica A answered during the outage, sent to replica B, reaches the backend
// and frees a lease a running request holds (one admitted too many, until that lease would have
// lapsed); sent to A, it does not.
TEST_F(UnbackedStepTest, ReleaseThroughAnotherReplicaFreesARunningLease) {
  auto a = Replica(FailureMode::kAllow);
  auto b = Replica(FailureMode::kAllow);
  backend_.state = SwitchedBackend::State::kDown;
  EXPECT_TRUE(Acquire(*a));
  EXPECT_TRUE(Acquire(*a));
  backend_.state = SwitchedBackend::State::kUp;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Acquire(*b)) << i;
  }
  EXPECT_EQ(Release(*a), 0u);  // matched on A
  EXPECT_EQ(Release(*b), 1u);  // B has no record: a running request's lease is freed
  EXPECT_EQ(Admits(*b), 1);
}

// Verifies the store is bounded by RateLimiterOptions::unbacked_max_keys, evicting (counted) for
// new keys.
TEST_F(UnbackedStepTest, IsBoundedByTheOptions) {
  RateLimiterOptions options;
  options.unbacked_max_keys = 32;  // one key per shard
  RateLimiter replica(store_, backend_, clock_, metrics_, options);
  backend_.state = SwitchedBackend::State::kDown;
  for (int i = 0; i < 200; ++i) {
    Request request = testing::MakeRequest("edge", {{{"streams", absl::StrCat("u", i)}}});
    ASSERT_TRUE(testing::DecideInline(replica, request).ok());
  }
  const std::string metrics = MetricsOf(replica);
  EXPECT_THAT(metrics, HasSubstr("sluice_unbacked_acquisitions_recorded_total 200\n"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "sluice_unbacked_acquisitions_keys ([0-9]|[12][0-9]|3[0-2])\n"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "sluice_unbacked_acquisitions_evictions_total 1[6-9][0-9]\n"));
}

}  // namespace
}  // namespace sluice
