#include "server/service/rate_limiter.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "tests/support/fake_clock.h"
#include "server/config/config_loader.h"
#include "tests/server/service/request_builder.h"
#include "tests/support/recording_span_sink.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using Response = RateLimiter::Response;
using Request = RateLimiter::Request;

constexpr char kConfig[] = R"(domain: api
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 2
  - key: user
    value: vip
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: plan
    value: gold
    rate_limit:
      name: gold
      unit: minute
      requests_per_unit: 100
      replaces:
        - name: per_user
  - key: health
    rate_limit:
      unlimited: true
  - key: beta
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: both
    rate_limits:
      - unit: second
        requests_per_unit: 2
      - unit: hour
        requests_per_unit: 3
        algorithm: sliding_window_log
  - key: tenant
    descriptors:
      - key: calls
        rate_limit:
          unit: minute
          requests_per_unit: 10
          hash_tag: tenant
      - key: uploads
        rate_limit:
          unit: minute
          requests_per_unit: 1
          hash_tag: tenant
  - key: leaky
    rate_limit:
      algorithm: leaky_bucket
      unit: second
      requests_per_unit: 10
      burst: 5
  - key: inflight
    rate_limit:
      algorithm: concurrency
      unit: minute
      requests_per_unit: 1
  - key: streams
    rate_limit:
      algorithm: concurrency
      unit: minute
      requests_per_unit: 3
  - key: streams_if_admitted
    rate_limit:
      algorithm: concurrency
      unit: minute
      requests_per_unit: 3
      charge: if_admitted
)";

// A backend that can never answer, for the failure policy.
class UnavailableBackend final : public Backend {
 public:
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck>, const TraceParent& /*trace*/,
                EvaluateCallback done) override {
    std::move(done)(absl::UnavailableError("redis down"), {});
  }
  absl::string_view Name() const override { return "unavailable"; }
};

// A backend whose every call Redis refused for its arguments (a bug, never an outage).
class RefusingBackend final : public Backend {
 public:
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck>, const TraceParent& /*trace*/,
                EvaluateCallback done) override {
    std::move(done)(WithFailureReason(absl::InternalError("redis refused: ERR sluice gcra: ..."),
                                      FailureReason::kArgument),
                    {});
  }
  absl::string_view Name() const override { return "refusing"; }
};

// Counts the checks that reach the backend it wraps, and keeps the hits of each.
class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(Backend& inner) : inner_(inner) {}
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& /*trace*/,
                EvaluateCallback done) override {
    checks_ += checks.size();
    for (const LimitCheck& check : checks) {
      hits_.push_back(check.hits);
    }
    inner_.Evaluate(checks, std::move(done));
  }
  absl::string_view Name() const override { return "counting"; }
  size_t checks() const { return checks_; }
  const std::vector<uint64_t>& hits() const { return hits_; }

 private:
  Backend& inner_;
  size_t checks_ = 0;
  std::vector<uint64_t> hits_;
};

class RateLimiterTest : public ::testing::Test {
 protected:
  RateLimiterTest() : store_(Load()), backend_(clock_) { Rebuild(RateLimiterOptions()); }

  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigText("api.yaml", kConfig);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  void Rebuild(RateLimiterOptions options, Backend* backend = nullptr,
               OverLimitCache* cache = nullptr) {
    limiter_ = std::make_unique<RateLimiter>(store_, backend ? *backend : backend_, clock_,
                                             metrics_, options, cache);
  }

  static Request MakeRequest(const std::vector<testing::Entries>& ds, uint32_t hits = 0) {
    return testing::MakeRequest("api", ds, hits);
  }

  absl::StatusOr<Response> Decide(const Request& request) {
    return testing::DecideInline(*limiter_, request);
  }

  Response MustDecide(const Request& request) {
    auto r = Decide(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Response();
  }

  FakeClock clock_{1700006400000000};
  ConfigStore store_;
  MemoryBackend backend_;
  Metrics metrics_;
  std::unique_ptr<RateLimiter> limiter_;
};

// Verifies the limit is enforced per descriptor value and statuses keep request order.
TEST_F(RateLimiterTest, EnforcesPerValueLimitsInRequestOrder) {
  Request r = MakeRequest({{{"user", "a"}}, {{"color", "red"}}, {{"user", "b"}}});
  Response first = MustDecide(r);
  ASSERT_EQ(first.statuses_size(), 3);
  EXPECT_EQ(first.statuses(0).limit_remaining(), 1u);
  EXPECT_FALSE(first.statuses(1).has_current_limit());
  EXPECT_EQ(first.statuses(2).limit_remaining(), 1u);
  MustDecide(r);
  Response third = MustDecide(r);
  EXPECT_EQ(third.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(third.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(third.statuses(1).code(), Response::OK);
  EXPECT_EQ(third.statuses(2).code(), Response::OVER_LIMIT);
  EXPECT_EQ(third.statuses(0).current_limit().name(), "per_user");
}

// Verifies the IETF RateLimit-Policy and RateLimit headers: the descriptor closest to its limit,
// named by its rule's name (else its stat key), its window in seconds, its remaining and reset;
// off by default.
TEST_F(RateLimiterTest, IetfRateLimitHeadersShowTheDescriptorClosestToItsLimit) {
  const auto header = [](const Response& r, absl::string_view name) -> std::string {
    for (const auto& h : r.response_headers_to_add()) {
      if (h.key() == name) {
        return h.value();
      }
    }
    return "absent";
  };
  EXPECT_EQ(header(MustDecide(MakeRequest({{{"user", "a"}}})), "RateLimit"), "absent");
  RateLimiterOptions options;
  options.respond.ietf_rate_limit_headers = true;
  Rebuild(options);
  clock_.AdvanceMicros(15'500'000);  // 44.5 s left in the minute window
  // After this request user=a has 0 left of 2 (per_user), vip 4 of 5: user=a is the closer.
  Response r = MustDecide(MakeRequest({{{"user", "vip"}}, {{"user", "a"}}}));
  EXPECT_EQ(header(r, "RateLimit-Policy"), "\"per_user\";q=2;w=60");
  EXPECT_EQ(header(r, "RateLimit"), "\"per_user\";r=0;t=45");
  EXPECT_EQ(header(r, "RateLimit-Limit"), "absent");  // the legacy trio is its own flag
  // A rule without a name is named by its stat key; over limit, the denied descriptor shows.
  Response vip = MustDecide(MakeRequest({{{"user", "vip"}}}));
  EXPECT_EQ(header(vip, "RateLimit-Policy"), "\"api.user_vip\";q=5;w=60");
  EXPECT_EQ(header(vip, "RateLimit"), "\"api.user_vip\";r=3;t=45");
  Response over = MustDecide(MakeRequest({{{"user", "vip"}}, {{"user", "a"}}}));
  EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(header(over, "RateLimit"), "\"per_user\";r=0;t=45");
  EXPECT_EQ(header(over, "retry-after"), "45");
}

// Verifies sluice_decisions_total counts each descriptor once, by the algorithm of the rule that
// answered it and how: within limit, over limit, shadow mode, and the failure policy.
TEST_F(RateLimiterTest, DecisionsAreCountedByAlgorithmAndOutcome) {
  const auto count = [this](absl::string_view algorithm, absl::string_view outcome) {
    const std::string text = metrics_.Serialize();
    const std::string prefix = absl::StrCat("sluice_decisions_total{algorithm=\"", algorithm,
                                            "\",outcome=\"", outcome, "\"} ");
    const size_t at = text.find(prefix);
    return at == std::string::npos
               ? std::string("absent")
               : text.substr(at + prefix.size(), text.find('\n', at) - at - prefix.size());
  };
  MustDecide(MakeRequest({{{"user", "a"}}, {{"user", "a"}}}));  // two checks of one key
  MustDecide(MakeRequest({{{"user", "a"}}}));
  MustDecide(MakeRequest({{{"beta", "b"}}}));
  MustDecide(MakeRequest({{{"beta", "b"}}}));
  MustDecide(MakeRequest({{{"leaky", "l"}}, {{"color", "red"}}}));
  EXPECT_EQ(count("fixed_window", "within_limit"), "3");  // user a twice, beta once
  EXPECT_EQ(count("fixed_window", "over_limit"), "1");
  EXPECT_EQ(count("fixed_window", "shadow_mode"), "1");
  EXPECT_EQ(count("leaky_bucket", "within_limit"), "1");  // no rule for color: not counted
  EXPECT_EQ(count("gcra", "within_limit"), "0");
  UnavailableBackend down;
  Rebuild(RateLimiterOptions(), &down);
  MustDecide(MakeRequest({{{"leaky", "l"}}}));
  EXPECT_EQ(count("leaky_bucket", "failure_policy"), "1");
}

// A request whose descriptors i with refund[i] carry is_negative_hits.
Request WithRefunds(Request request, const std::vector<bool>& refund) {
  for (size_t i = 0; i < refund.size(); ++i) {
    request.mutable_descriptors(static_cast<int>(i))->set_is_negative_hits(refund[i]);
  }
  return request;
}

// Verifies a refund gives capacity back at once, is never denied (not even on a key over its
// limit, nor when it asks back more than was taken: nothing is banked), answers the state after
// it, and is counted as refunded, not as hits.
TEST_F(RateLimiterTest, RefundGivesBackAndIsNeverDenied) {
  const Request take = MakeRequest({{{"user", "r"}}});
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OK);
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OK);
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OVER_LIMIT);
  Response refunded = MustDecide(WithRefunds(MakeRequest({{{"user", "r"}}}), {true}));
  EXPECT_EQ(refunded.overall_code(), Response::OK);
  EXPECT_EQ(refunded.statuses(0).code(), Response::OK);
  EXPECT_EQ(refunded.statuses(0).limit_remaining(), 1u);
  EXPECT_EQ(refunded.statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(MustDecide(take).statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OVER_LIMIT);
  // Asking back more than was taken fills the window's room, and no more.
  Response all = MustDecide(WithRefunds(MakeRequest({{{"user", "r"}}}, 100), {true}));
  EXPECT_EQ(all.statuses(0).limit_remaining(), 2u);
  EXPECT_EQ(MustDecide(MakeRequest({{{"user", "r"}}}, 3)).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(MustDecide(MakeRequest({{{"user", "r"}}}, 2)).overall_code(), Response::OK);
  // A key never taken from stays fresh.
  EXPECT_EQ(MustDecide(WithRefunds(MakeRequest({{{"user", "new"}}}, 5), {true}))
                .statuses(0)
                .limit_remaining(),
            2u);
  const std::string text = metrics_.Serialize();
  EXPECT_THAT(text, HasSubstr("sluice_decisions_total{algorithm=\"fixed_window\","
                              "outcome=\"refunded\"} 3"));
  EXPECT_THAT(text, HasSubstr("sluice_hits_refunded_total{algorithm=\"fixed_window\"} 106"));
  EXPECT_THAT(text, HasSubstr("sluice_rule_total_negative_hits{key=\"api.user\"} 106"));
  EXPECT_THAT(text, HasSubstr("sluice_rule_total_hits{key=\"api.user\"} 10"));
}

// Verifies a refund in a request with charges: each descriptor is decided as usual, the refund is
// applied whatever the others' verdicts and answered OK, and in a co-located (all-or-nothing)
// request a refund neither denies the group nor is undone by its denial.
TEST_F(RateLimiterTest, RefundsMixedWithChargesAndInGroups) {
  // uploads (1 per minute) and calls (10) share the hash tag: one group.
  const auto tenant = [](absl::string_view rule) {
    return testing::Entries{{"tenant", "t"}, {std::string(rule), "x"}};
  };
  EXPECT_EQ(MustDecide(MakeRequest({tenant("uploads")})).overall_code(), Response::OK);
  // The group is denied (uploads is used up); the refund of calls is applied all the same.
  EXPECT_EQ(MustDecide(MakeRequest({tenant("calls")}, 4)).statuses(0).limit_remaining(), 6u);
  Request refund_calls =
      WithRefunds(MakeRequest({tenant("uploads"), tenant("calls")}), {false, true});
  refund_calls.mutable_descriptors(1)->mutable_hits_addend()->set_value(4);
  Response mixed = MustDecide(refund_calls);
  EXPECT_EQ(mixed.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(mixed.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(mixed.statuses(1).code(), Response::OK);
  EXPECT_EQ(mixed.statuses(1).limit_remaining(), 10u);
  // A refund of uploads beside a charge of calls: the group passes, both applied.
  Response passes = MustDecide(
      WithRefunds(MakeRequest({tenant("calls"), tenant("uploads")}), {false, true}));
  EXPECT_EQ(passes.overall_code(), Response::OK);
  EXPECT_EQ(passes.statuses(0).limit_remaining(), 9u);
  EXPECT_EQ(passes.statuses(1).limit_remaining(), 1u);
  EXPECT_EQ(MustDecide(MakeRequest({tenant("uploads")})).overall_code(), Response::OK);
  // Two rules on one descriptor: both given back.
  EXPECT_EQ(MustDecide(MakeRequest({{{"both", "b"}}}, 2)).overall_code(), Response::OK);
  Response both = MustDecide(WithRefunds(MakeRequest({{{"both", "b"}}}, 1), {true}));
  EXPECT_EQ(both.statuses(0).limit_remaining(), 1u);  // the per-second rule: 1 of 2 left
  EXPECT_EQ(MustDecide(MakeRequest({{{"both", "b"}}})).statuses(0).limit_remaining(), 0u);
}

// Verifies a refund clears this replica's over-limit cache entry for its key, so the capacity
// it returns is used at once instead of being denied from the cache until the retry time.
TEST_F(RateLimiterTest, RefundForgetsTheOverLimitCacheEntry) {
  CountingBackend counting(backend_);
  OverLimitCache cache(clock_, 1000);
  Rebuild(RateLimiterOptions(), &counting, &cache);
  const Request take = MakeRequest({{{"user", "c"}}}, 2);
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OK);
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OVER_LIMIT);  // remembered
  const size_t before = counting.checks();
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OVER_LIMIT);  // from the cache
  EXPECT_EQ(counting.checks(), before);
  // The refund itself is never answered from the cache, and it forgets the key.
  EXPECT_EQ(MustDecide(WithRefunds(MakeRequest({{{"user", "c"}}}, 2), {true})).overall_code(),
            Response::OK);
  EXPECT_EQ(counting.checks(), before + 1);
  EXPECT_EQ(MustDecide(take).overall_code(), Response::OK);
  EXPECT_EQ(counting.checks(), before + 2);
  // An in-flight limit is never remembered: a release through another replica may free it.
  // (Each denied acquisition holds a lease until its own release: three releases free the one.)
  const Request acquire = MakeRequest({{{"inflight", "i"}}});
  EXPECT_EQ(MustDecide(acquire).overall_code(), Response::OK);
  EXPECT_EQ(MustDecide(acquire).overall_code(), Response::OVER_LIMIT);
  const size_t held = counting.checks();
  EXPECT_EQ(MustDecide(acquire).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(counting.checks(), held + 1);
  EXPECT_EQ(MustDecide(WithRefunds(acquire, {true})).statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(MustDecide(WithRefunds(acquire, {true})).statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(MustDecide(WithRefunds(acquire, {true})).statuses(0).limit_remaining(), 1u);
  EXPECT_EQ(MustDecide(acquire).overall_code(), Response::OK);
}

// Verifies an in-flight limit holds with releases as Envoy sends them, for every request that
// ends, the denied ones included: 3 running on a limit of 3, a 4th denied and released, and the
// next acquisition is still denied (the denial held a lease its release gave back), until one
// of the running requests ends. Charged denials are counted as such. An explicit
// `charge: if_admitted` behaves as before: the denial's release frees a running request's lease,
// and a 4th is admitted.
TEST_F(RateLimiterTest, InFlightLimitHoldsWithReleasesOfDenials) {
  const Request acquire = MakeRequest({{{"streams", "u"}}});
  const Request release = WithRefunds(acquire, {true});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(MustDecide(acquire).overall_code(), Response::OK) << i;
  }
  Response denied = MustDecide(acquire);
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).limit_remaining(), 0u);
  Response released = MustDecide(release);  // the denied request's
  EXPECT_EQ(released.overall_code(), Response::OK);
  EXPECT_EQ(released.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(MustDecide(acquire).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(MustDecide(release).statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(MustDecide(release).statuses(0).limit_remaining(), 1u);  // a running one ends
  EXPECT_EQ(MustDecide(acquire).overall_code(), Response::OK);
  EXPECT_EQ(MustDecide(acquire).overall_code(), Response::OVER_LIMIT);
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("sluice_hits_charged_over_limit_total{algorithm=\"concurrency\"} 3"));

  const Request old_acquire = MakeRequest({{{"streams_if_admitted", "u"}}});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(MustDecide(old_acquire).overall_code(), Response::OK) << i;
  }
  EXPECT_EQ(MustDecide(old_acquire).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(MustDecide(WithRefunds(old_acquire, {true})).statuses(0).limit_remaining(), 1u);
  EXPECT_EQ(MustDecide(old_acquire).overall_code(), Response::OK);  // 4 in flight
}

// Verifies --refuse_refunds: a refund in a refused domain fails the call with INVALID_ARGUMENT
// naming the descriptor and the flag (counted, nothing applied); '*' refuses every domain; other
// domains and requests without refunds are decided as usual.
TEST_F(RateLimiterTest, RefusedRefundsAreInvalidArguments) {
  RateLimiterOptions options;
  options.refuse_refunds = {"other", "api"};
  Rebuild(options);
  EXPECT_EQ(MustDecide(MakeRequest({{{"user", "f"}}}, 2)).overall_code(), Response::OK);
  auto refused =
      Decide(WithRefunds(MakeRequest({{{"user", "f"}}, {{"user", "f"}}}), {false, true}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "descriptors[1]: is_negative_hits (a refund) is refused in domain 'api' by this "
            "server's --refuse_refunds");
  EXPECT_EQ(MustDecide(MakeRequest({{{"user", "f"}}})).overall_code(), Response::OVER_LIMIT);
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("sluice_refunds_refused_total 1"));
  options.refuse_refunds = {"*"};
  Rebuild(options);
  EXPECT_FALSE(Decide(WithRefunds(testing::MakeRequest("elsewhere", {{{"k", "v"}}}), {true})).ok());
  options.refuse_refunds = {"other"};
  Rebuild(options);
  EXPECT_TRUE(Decide(WithRefunds(MakeRequest({{{"user", "f"}}}), {true})).ok());
}

// Verifies a refund the backend cannot apply is still answered OK, under every failure mode: a
// refund is never denied (and the outage is counted as for any descriptor).
TEST_F(RateLimiterTest, RefundDuringAnOutageIsAnsweredOk) {
  UnavailableBackend down;
  for (FailureMode mode : {FailureMode::kAllow, FailureMode::kDeny, FailureMode::kLocal}) {
    RateLimiterOptions options;
    options.failure_mode = mode;
    Rebuild(options, &down);
    Response r = MustDecide(WithRefunds(MakeRequest({{{"user", "o"}}}, 3), {true}));
    EXPECT_EQ(r.overall_code(), Response::OK) << FailureModeName(mode);
    EXPECT_EQ(r.statuses(0).code(), Response::OK) << FailureModeName(mode);
  }
}

// Verifies an exact value beats the default for its key.
TEST_F(RateLimiterTest, ExactValueOverridesDefault) {
  Response r = MustDecide(MakeRequest({{{"user", "vip"}}}));
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 5u);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 4u);
}

// Verifies over limit: remaining 0, reset at the window end, retry-after rounded up.
TEST_F(RateLimiterTest, OverLimitReportsWaitAndRetryAfterHeader) {
  clock_.AdvanceMicros(59'500'000);  // 0.5 s before the minute ends
  Request r = MakeRequest({{{"user", "a"}}}, 2);
  EXPECT_EQ(MustDecide(r).overall_code(), Response::OK);
  Response over = MustDecide(MakeRequest({{{"user", "a"}}}));
  EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 0);
  EXPECT_EQ(over.statuses(0).duration_until_reset().nanos(), 500'000'000);
  ASSERT_EQ(over.response_headers_to_add_size(), 1);
  EXPECT_EQ(over.response_headers_to_add(0).key(), "retry-after");
  EXPECT_EQ(over.response_headers_to_add(0).value(), "1");
}

// Verifies a descriptor's hits_addend wins over the request's, and 0 checks without consuming.
TEST_F(RateLimiterTest, DescriptorHitsAddendWinsAndZeroDoesNotConsume) {
  Request r = MakeRequest({{{"user", "z"}}}, 2);
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  for (int i = 0; i < 5; ++i) {
    Response peek = MustDecide(r);
    EXPECT_EQ(peek.overall_code(), Response::OK);
    EXPECT_EQ(peek.statuses(0).limit_remaining(), 2u);
  }
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(1);
  EXPECT_EQ(MustDecide(r).statuses(0).limit_remaining(), 1u);
}

// Verifies a rule that replaces another removes it from the decision.
TEST_F(RateLimiterTest, ReplacesDropsTheNamedRule) {
  Request r = MakeRequest({{{"user", "r"}}, {{"plan", "gold"}}});
  for (int i = 0; i < 5; ++i) {
    Response resp = MustDecide(r);
    EXPECT_EQ(resp.overall_code(), Response::OK) << i;
    EXPECT_FALSE(resp.statuses(0).has_current_limit());
    EXPECT_EQ(resp.statuses(1).current_limit().name(), "gold");
  }
}

// Verifies unlimited rules answer OK without a limit.
TEST_F(RateLimiterTest, UnlimitedIsOkWithoutLimit) {
  for (int i = 0; i < 10; ++i) {
    Response r = MustDecide(MakeRequest({{{"health", "x"}}}));
    EXPECT_EQ(r.overall_code(), Response::OK);
    EXPECT_FALSE(r.statuses(0).has_current_limit());
  }
}

// Verifies shadow mode answers OK but still counts the hit as over the limit.
TEST_F(RateLimiterTest, ShadowModeIsOkButCounted) {
  MustDecide(MakeRequest({{{"beta", "x"}}}));
  Response r = MustDecide(MakeRequest({{{"beta", "x"}}}));
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_EQ(r.statuses(0).code(), Response::OK);
  EXPECT_TRUE(r.response_headers_to_add().empty());
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("sluice_rule_shadow_mode{key=\"api.beta\"} 1"));
}

// Verifies several rules on one descriptor: all must admit, a denial consumes from none, and
// the status reports the most restrictive rule.
TEST_F(RateLimiterTest, SeveralRulesAllMustAdmitAndDenialConsumesNothing) {
  Request r = MakeRequest({{{"both", "x"}}});
  Response first = MustDecide(r);
  EXPECT_EQ(first.statuses(0).current_limit().unit(), Response::RateLimit::SECOND);
  EXPECT_EQ(first.statuses(0).limit_remaining(), 1u);
  MustDecide(r);
  Response denied = MustDecide(r);  // the per-second rule denies
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).current_limit().unit(), Response::RateLimit::SECOND);
  clock_.AdvanceMicros(1'000'000);
  // The hourly log saw only the two admitted hits, so one is left.
  Response third = MustDecide(r);
  EXPECT_EQ(third.overall_code(), Response::OK);
  EXPECT_EQ(third.statuses(0).current_limit().unit(), Response::RateLimit::HOUR);
  EXPECT_EQ(third.statuses(0).limit_remaining(), 0u);
  clock_.AdvanceMicros(1'000'000);
  Response fourth = MustDecide(r);
  EXPECT_EQ(fourth.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(fourth.statuses(0).current_limit().unit(), Response::RateLimit::HOUR);
  EXPECT_GT(fourth.statuses(0).duration_until_reset().seconds(), 3500);
}

// Verifies co-location: descriptors whose rules tag by the same entry are decided together, so
// when one denies, the other consumes nothing; without a shared tag they stay independent.
TEST_F(RateLimiterTest, CoLocatedDescriptorsAreAllOrNothing) {
  Request both = MakeRequest({{{"tenant", "t1"}, {"calls", "x"}}, {{"tenant", "t1"}, {"uploads", "x"}}});
  Response first = MustDecide(both);
  EXPECT_EQ(first.overall_code(), Response::OK);
  EXPECT_EQ(first.statuses(0).limit_remaining(), 9u);
  Response second = MustDecide(both);  // uploads (1/minute) denies: calls must not consume
  EXPECT_EQ(second.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(second.statuses(1).code(), Response::OVER_LIMIT);
  Response calls = MustDecide(MakeRequest({{{"tenant", "t1"}, {"calls", "x"}}}));
  EXPECT_EQ(calls.statuses(0).limit_remaining(), 8u);  // only the first request consumed

  // Different tenants do not share a tag: each descriptor is decided on its own, as upstream.
  Request mixed = MakeRequest({{{"tenant", "t2"}, {"calls", "x"}}, {{"tenant", "t3"}, {"uploads", "x"}}});
  MustDecide(mixed);
  Response again = MustDecide(mixed);
  EXPECT_EQ(again.statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(again.statuses(0).limit_remaining(), 8u);  // consumed despite the other's denial
}

// The value of a response header, or "" when absent.
std::string HeaderOf(const Response& r, absl::string_view key) {
  for (const auto& h : r.response_headers_to_add()) {
    if (h.key() == key) {
      return h.value();
    }
  }
  return "";
}

// Verifies a request of more hits than its rule can ever hold (up to 2^64 - 1) is denied
// without asking the backend, says so (no retry-after: no wait helps; the reset is one
// period, never 0), is counted as never_admitted, and consumes nothing.
TEST_F(RateLimiterTest, HitsBeyondWhatTheRuleHoldsAreDeniedWithoutTheBackend) {
  CountingBackend counting(backend_);
  Rebuild(RateLimiterOptions(), &counting);
  for (uint64_t hits : {uint64_t{3}, uint64_t{1} << 53, uint64_t{1} << 63,
                        std::numeric_limits<uint64_t>::max()}) {
    Request r = MakeRequest({{{"user", "a"}}});
    r.mutable_descriptors(0)->mutable_hits_addend()->set_value(hits);
    Response over = MustDecide(r);
    EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT) << hits;
    EXPECT_EQ(over.statuses(0).code(), Response::OVER_LIMIT) << hits;
    EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
    EXPECT_EQ(over.statuses(0).current_limit().requests_per_unit(), 2u);
    EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 60);
    EXPECT_EQ(HeaderOf(over, "retry-after"), "") << hits;
  }
  EXPECT_EQ(counting.checks(), 0u);
  Response fresh = MustDecide(MakeRequest({{{"user", "a"}}}));
  EXPECT_EQ(fresh.overall_code(), Response::OK);
  EXPECT_EQ(fresh.statuses(0).limit_remaining(), 1u);  // nothing was consumed before
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("sluice_decisions_total{algorithm=\"fixed_window\",outcome=\"never_"
                        "admitted\"} 4"));
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("sluice_rule_over_limit{key=\"api.user\"}"));

  // A request that can never pass gets no retry-after even beside one that must wait.
  MustDecide(MakeRequest({{{"user", "b"}}}, 2));
  Request mixed = MakeRequest({{{"user", "b"}}, {{"user", "c"}}});
  mixed.mutable_descriptors(1)->mutable_hits_addend()->set_value(5);
  Response both = MustDecide(mixed);
  EXPECT_EQ(both.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(both.statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(HeaderOf(both, "retry-after"), "");
  // ... while the same wait alone gets its retry-after.
  EXPECT_NE(HeaderOf(MustDecide(MakeRequest({{{"user", "b"}}})), "retry-after"), "");
}

// Verifies a descriptor with several rules, one of which can never hold the request, is denied
// by that rule; the other rules are asked with 0 hits (they report, consume nothing).
TEST_F(RateLimiterTest, RuleThatCanNeverHoldTheRequestDeniesItsDescriptorWhole) {
  CountingBackend counting(backend_);
  Rebuild(RateLimiterOptions(), &counting);
  Request r = MakeRequest({{{"both", "n"}}}, 3);  // 2/second can never; 3/hour could
  Response over = MustDecide(r);
  EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).current_limit().unit(), Response::RateLimit::SECOND);
  EXPECT_EQ(HeaderOf(over, "retry-after"), "");
  EXPECT_THAT(counting.hits(), ::testing::ElementsAre(0u));
  // The hourly log consumed nothing: three single hits still pass it (a second apart for the
  // per-second rule).
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(MustDecide(MakeRequest({{{"both", "n"}}})).overall_code(), Response::OK) << i;
    clock_.AdvanceMicros(1'000'000);
  }
  EXPECT_EQ(MustDecide(MakeRequest({{{"both", "n"}}})).overall_code(), Response::OVER_LIMIT);
}

// Verifies a co-located request (all-or-nothing) with one descriptor that can never pass is
// denied whole and consumes nothing; the other descriptor reports its state.
TEST_F(RateLimiterTest, CoLocatedRequestWithADescriptorThatCanNeverPassConsumesNothing) {
  Request both =
      MakeRequest({{{"tenant", "t9"}, {"calls", "x"}}, {{"tenant", "t9"}, {"uploads", "x"}}});
  both.mutable_descriptors(1)->mutable_hits_addend()->set_value(~uint64_t{0});
  Response over = MustDecide(both);
  EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).code(), Response::OK);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 10u);  // asked with 0 hits
  EXPECT_EQ(over.statuses(1).code(), Response::OVER_LIMIT);
  Response calls = MustDecide(MakeRequest({{{"tenant", "t9"}, {"calls", "x"}}}));
  EXPECT_EQ(calls.statuses(0).limit_remaining(), 9u);

  // The denial stands when the backend cannot answer for the others, whatever the policy.
  UnavailableBackend down;
  Rebuild(RateLimiterOptions(), &down);
  Response outage = MustDecide(both);
  EXPECT_EQ(outage.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(outage.statuses(0).code(), Response::OK);  // failure_mode allow
  EXPECT_EQ(outage.statuses(1).code(), Response::OVER_LIMIT);
}

// Verifies a call Redis refused for its arguments is never answered by the failure policy (allow
// here, which would admit everything): its checks are decided in process, and it is counted
// under its own reason.
TEST_F(RateLimiterTest, ArgumentErrorIsDecidedInProcessNotByTheFailurePolicy) {
  RefusingBackend refusing;
  Rebuild(RateLimiterOptions(), &refusing);
  EXPECT_EQ(MustDecide(MakeRequest({{{"user", "r"}}})).overall_code(), Response::OK);
  EXPECT_EQ(MustDecide(MakeRequest({{{"user", "r"}}})).overall_code(), Response::OK);
  Response third = MustDecide(MakeRequest({{{"user", "r"}}}));
  EXPECT_EQ(third.overall_code(), Response::OVER_LIMIT);  // per_user: 2 a minute
  EXPECT_NE(HeaderOf(third, "retry-after"), "");
  const std::string text = metrics_.Serialize();
  EXPECT_THAT(text, HasSubstr("sluice_backend_failures_total{reason=\"argument\"} 3"));
  EXPECT_THAT(text, HasSubstr("sluice_failure_policy_decisions_total{mode=\"allow\"} 0"));
}

// Verifies a request-supplied limit override is used instead of the config.
TEST_F(RateLimiterTest, RequestLimitOverride) {
  Request r = MakeRequest({{{"user", "o"}}});
  auto* limit = r.mutable_descriptors(0)->mutable_limit();
  limit->set_requests_per_unit(1);
  limit->set_unit(envoy::type::v3::SECOND);
  Response first = MustDecide(r);
  EXPECT_EQ(first.statuses(0).current_limit().requests_per_unit(), 1u);
  EXPECT_EQ(first.statuses(0).current_limit().unit(), Response::RateLimit::SECOND);
  EXPECT_EQ(MustDecide(r).overall_code(), Response::OVER_LIMIT);
}

// Verifies the leaky bucket reports the shaping delay in dynamic metadata.
TEST_F(RateLimiterTest, LeakyBucketReportsDelay) {
  Request r = MakeRequest({{{"leaky", "x"}}}, 2);
  Response first = MustDecide(r);
  EXPECT_FALSE(first.has_dynamic_metadata());
  Response second = MustDecide(r);
  ASSERT_TRUE(second.has_dynamic_metadata());
  // Two units queued ahead, draining at 10 per second: 200 ms.
  EXPECT_DOUBLE_EQ(second.dynamic_metadata().fields().at("sluice.delay_ms").number_value(), 200.0);
}

// Verifies unknown domains answer OK with a status per descriptor.
TEST_F(RateLimiterTest, UnknownDomainIsOk) {
  Request r = MakeRequest({{{"user", "a"}}, {{"user", "b"}}});
  r.set_domain("other");
  Response resp = MustDecide(r);
  EXPECT_EQ(resp.overall_code(), Response::OK);
  ASSERT_EQ(resp.statuses_size(), 2);
  EXPECT_FALSE(resp.statuses(0).has_current_limit());
}

// Verifies the over-limit cache answers a denied key locally until its retry time, gives the
// same answer the backend would, and lets other keys, fewer hits and new configs through.
TEST_F(RateLimiterTest, OverLimitCacheAnswersDeniedKeysLocally) {
  CountingBackend counting(backend_);
  OverLimitCache cache(clock_, 1000);
  Rebuild(RateLimiterOptions(), &counting, &cache);
  Request two = MakeRequest({{{"user", "s"}}}, 2);
  Request one = MakeRequest({{{"user", "s"}}});
  EXPECT_EQ(MustDecide(two).overall_code(), Response::OK);
  Response denied = MustDecide(two);  // reaches the backend and is remembered
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  const size_t before = counting.checks();
  for (int i = 0; i < 50; ++i) {
    Response cached = MustDecide(two);
    EXPECT_EQ(cached.overall_code(), Response::OVER_LIMIT);
    EXPECT_EQ(cached.statuses(0).duration_until_reset().seconds(),
              denied.statuses(0).duration_until_reset().seconds());
    EXPECT_EQ(cached.response_headers_to_add(0).value(), denied.response_headers_to_add(0).value());
  }
  EXPECT_EQ(counting.checks(), before);  // none of the 50 reached the backend
  MustDecide(one);                       // fewer hits: asks the backend
  EXPECT_EQ(counting.checks(), before + 1);
  // Mixed requests send only the unknown descriptors.
  MustDecide(MakeRequest({{{"user", "s"}}, {{"user", "t"}}}, 2));
  EXPECT_EQ(counting.checks(), before + 2);
  // At the retry time the key goes to the backend again (the next minute: admitted).
  clock_.AdvanceMicros(60'000'000);
  EXPECT_EQ(MustDecide(two).overall_code(), Response::OK);
  EXPECT_EQ(counting.checks(), before + 3);
  // A new config may admit what the old denied: the cache starts over.
  MustDecide(two);
  const size_t denied_again = counting.checks();
  MustDecide(two);
  EXPECT_EQ(counting.checks(), denied_again);
  store_.Set(Load());
  MustDecide(two);
  EXPECT_EQ(counting.checks(), denied_again + 1);
}

// A tracer over a recording sink, and one traced decision's spans.
class TracedDecision {
 public:
  TracedDecision(const Clock& clock, TracerOptions options)
      : tracer_(sink_, clock, ids_, options) {}

  // Decides `request` under a new call span, ended once the decision is done; returns the
  // spans recorded for it (the call's last).
  std::vector<SpanData> Decide(RateLimiter& limiter, const RateLimiter::Request& request) {
    sink_.Clear();
    Span call = tracer_.StartCall("call", std::nullopt);
    EXPECT_TRUE(testing::DecideInline(limiter, request, &call).ok());
    call.End();
    return sink_.Spans();
  }

 private:
  testing::RecordingSpanSink sink_;
  RandomIdGenerator ids_;
  Tracer tracer_;
};

// Verifies that a traced decision describes the request on its span (domain, descriptor count,
// entry keys, overall code), entry values only when asked for, and that an untraced one is
// decided all the same.
TEST_F(RateLimiterTest, TracedDecisionDescribesTheRequest) {
  const Request request = MakeRequest({{{"user", "s"}}, {{"plan", "gold"}}});
  TracedDecision keys_only(clock_, TracerOptions{});
  std::vector<SpanData> spans = keys_only.Decide(*limiter_, request);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(testing::StringAttribute(spans[0], "ratelimit.domain"), "api");
  EXPECT_EQ(testing::IntAttribute(spans[0], "ratelimit.descriptors"), 2);
  EXPECT_EQ(testing::StringAttribute(spans[0], "ratelimit.descriptor_keys"), "user;plan");
  EXPECT_EQ(spans[0].Find("ratelimit.descriptor_entries"), nullptr);
  EXPECT_EQ(testing::StringAttribute(spans[0], "ratelimit.overall_code"), "OK");
  EXPECT_EQ(spans[0].status, SpanStatus::kUnset);

  TracedDecision with_values(clock_, TracerOptions{.descriptor_values = true});
  spans = with_values.Decide(*limiter_, MakeRequest({{{"user", "s"}}}, 5));
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(testing::StringAttribute(spans[0], "ratelimit.descriptor_entries"), "user=s");
  EXPECT_EQ(testing::IntAttribute(spans[0], "ratelimit.hits_addend"), 5);
  EXPECT_EQ(testing::StringAttribute(spans[0], "ratelimit.overall_code"), "OVER_LIMIT");
}

// Verifies that a decision the over-limit cache answers gets a span of the cache's answer under
// its own, and that one the cache does not know gets none.
TEST_F(RateLimiterTest, TracedDecisionShowsTheOverLimitCacheAnswering) {
  OverLimitCache cache(clock_, 1000);
  Rebuild(RateLimiterOptions(), nullptr, &cache);
  TracedDecision traced(clock_, TracerOptions{});
  const Request two = MakeRequest({{{"user", "c"}}}, 2);
  std::vector<SpanData> spans = traced.Decide(*limiter_, two);  // admitted
  EXPECT_EQ(spans.size(), 1u);
  spans = traced.Decide(*limiter_, two);  // denied by the backend, and learned
  EXPECT_EQ(spans.size(), 1u);
  spans = traced.Decide(*limiter_, two);  // answered by the cache
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].name, "over_limit_cache");
  EXPECT_EQ(spans[0].parent_span_id, spans[1].span_id);
  EXPECT_EQ(testing::IntAttribute(spans[0], "sluice.checks_answered"), 1);
  EXPECT_EQ(testing::StringAttribute(spans[1], "ratelimit.overall_code"), "OVER_LIMIT");
}

// Verifies each validation rule, by message. (A descriptor without entries and a 64-bit
// hits_addend are valid, as upstream takes them: upstream_compat_test.cc.)
TEST_F(RateLimiterTest, RejectsInvalidRequestsWithClearMessages) {
  RateLimiterOptions options;
  options.max_descriptors = 2;
  options.max_entries = 2;
  options.max_key_bytes = 8;
  Rebuild(options);
  auto message_of = [&](const Request& r) {
    auto result = Decide(r);
    EXPECT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(result.status().message());
  };
  Request r = MakeRequest({{{"user", "a"}}});
  r.set_domain("");
  EXPECT_EQ(message_of(r), "domain must not be empty");
  EXPECT_EQ(message_of(MakeRequest({})), "descriptors must not be empty");
  EXPECT_EQ(message_of(MakeRequest({{{"a", "1"}}, {{"b", "2"}}, {{"c", "3"}}})),
            "too many descriptors: 3 (at most 2)");
  EXPECT_EQ(message_of(MakeRequest({{{"a", "1"}, {"b", "2"}, {"c", "3"}}})),
            "descriptors[0]: too many entries: 3 (at most 2)");
  EXPECT_EQ(message_of(MakeRequest({{{"a", "1"}}, {{"", "2"}}})),
            "descriptors[1].entries[0].key must not be empty");
  EXPECT_EQ(message_of(MakeRequest({{{"a", "123456789"}}})),
            "descriptors[0].entries[0].value is 9 bytes (at most 8)");
  Request bad_unit = MakeRequest({{{"a", "1"}}});
  bad_unit.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1);
  EXPECT_THAT(message_of(bad_unit), HasSubstr("descriptors[0].limit.unit must be"));
}

// Verifies the failure policy: allow answers OK, deny answers OVER_LIMIT, and both are counted.
TEST_F(RateLimiterTest, FailurePolicyWhenBackendCannotAnswer) {
  UnavailableBackend down;
  RateLimiterOptions allow;
  Rebuild(allow, &down);
  Request r = MakeRequest({{{"user", "a"}}, {{"color", "red"}}});
  Response allowed = MustDecide(r);
  EXPECT_EQ(allowed.overall_code(), Response::OK);
  RateLimiterOptions deny;
  deny.failure_mode = FailureMode::kDeny;
  Rebuild(deny, &down);
  Response denied = MustDecide(r);
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(1).code(), Response::OK);  // no rule, nothing to deny
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("sluice_backend_failures_total{reason=\"connection\"} 2"));
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("sluice_failure_policy_decisions_total{mode=\"allow\"} 1"));
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("sluice_failure_policy_decisions_total{mode=\"deny\"} 1"));
}

// ---- failure_mode per domain, and local: the in-process fallback during an outage.

// Domains with and without their own failure_mode, all with one 30-per-minute rule on `user`.
const ConfigSource kOutageSources[] = {
    {"local.yaml", R"(domain: local
failure_mode: local
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: half
    rate_limit: {unit: minute, requests_per_unit: 30, local_share: 0.5}
  - key: beta
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 3, algorithm: token_bucket, burst: 30}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 30}
      - {unit: hour, requests_per_unit: 6}
)"},
    {"allow.yaml", R"(domain: allow
failure_mode: allow
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 30}
)"},
    {"deny.yaml", R"(domain: deny
failure_mode: deny
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 30}
)"},
    {"unset.yaml", R"(domain: unset
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 30}
)"},
};

// Fails every batch while `down` (Redis unreachable), else decides with the backend it wraps.
class OutageBackend final : public Backend {
 public:
  explicit OutageBackend(Backend& inner) : inner_(inner) {}
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& /*trace*/,
                EvaluateCallback done) override {
    if (down) {
      std::move(done)(absl::UnavailableError("redis down"), {});
      return;
    }
    inner_.Evaluate(checks, std::move(done));
  }
  absl::string_view Name() const override { return "outage"; }

  bool down = true;

 private:
  Backend& inner_;
};

class RateLimiterFailureModeTest : public ::testing::Test {
 protected:
  RateLimiterFailureModeTest() : store_(Load()), shared_(clock_), outage_(shared_) {}

  static std::shared_ptr<const Config> Load() {
    auto config = LoadConfigSources(
        std::vector<ConfigSource>(std::begin(kOutageSources), std::end(kOutageSources)));
    EXPECT_TRUE(config.ok()) << config.status();
    return std::shared_ptr<const Config>(std::move(*config));
  }

  // A limiter whose flag says `mode`, in front of the outage backend.
  void Build(FailureMode mode, uint32_t replicas_hint, OverLimitCache* cache = nullptr) {
    RateLimiterOptions options;
    options.failure_mode = mode;
    options.replicas_hint = replicas_hint;
    limiter_ = std::make_unique<RateLimiter>(store_, outage_, clock_, metrics_, options, cache);
  }

  Response Ask(const std::string& domain, const std::vector<testing::Entries>& descriptors,
               uint32_t hits = 0) {
    auto r = testing::DecideInline(*limiter_, testing::MakeRequest(domain, descriptors, hits));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Response();
  }
  Response Ask(const std::string& domain, const std::string& key, const std::string& value) {
    return Ask(domain, {{{key, value}}});
  }

  // How many of `n` requests in a row are answered OK (stops at the first OVER_LIMIT).
  int AdmittedInARow(const std::string& domain, const std::string& key, const std::string& value,
                     int n = 100) {
    for (int i = 0; i < n; ++i) {
      if (Ask(domain, key, value).overall_code() != Response::OK) {
        return i;
      }
    }
    return n;
  }

  static std::string RetryAfter(const Response& r) {
    for (const auto& h : r.response_headers_to_add()) {
      if (h.key() == "retry-after") {
        return h.value();
      }
    }
    return "";
  }

  FakeClock clock_{1700006400000000};  // on a minute boundary
  ConfigStore store_;
  MemoryBackend shared_;  // stands in for Redis: the state every replica shares
  OutageBackend outage_;
  Metrics metrics_;
  std::unique_ptr<RateLimiter> limiter_;
};

// Verifies local with 3 replicas: a 30-per-minute rule admits exactly 10 per key during the
// outage, then denies until the window ends, with that wait as retry-after; other keys have
// their own 10, and the next window admits again.
TEST_F(RateLimiterFailureModeTest, LocalAdmitsTheReplicaShareThenDenies) {
  Build(FailureMode::kAllow, 3);  // the domain's failure_mode: local wins over the flag
  for (uint32_t i = 0; i < 10; ++i) {
    Response r = Ask("local", "user", "a");
    ASSERT_EQ(r.overall_code(), Response::OK) << i;
    EXPECT_EQ(r.statuses(0).limit_remaining(), 9 - i);
    EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 30u);  // the configured rule
  }
  clock_.AdvanceMicros(15'000'000);
  Response denied = Ask("local", "user", "a");
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(denied.statuses(0).duration_until_reset().seconds(), 45);  // the window's end
  EXPECT_EQ(RetryAfter(denied), "45");
  EXPECT_EQ(AdmittedInARow("local", "user", "a"), 0);
  EXPECT_EQ(AdmittedInARow("local", "user", "b"), 10);
  clock_.AdvanceMicros(45'000'000);
  EXPECT_EQ(AdmittedInARow("local", "user", "a"), 10);
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("sluice_failure_policy_decisions_total{mode=\"local\"} 34"));
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("sluice_failure_policy_decisions_total{mode=\"allow\"} 0"));
}

// Verifies a rule's local_share overrides --replicas_hint: 0.5 of 30 admits 15.
TEST_F(RateLimiterFailureModeTest, LocalShareOverridesReplicasHint) {
  Build(FailureMode::kAllow, 3);
  EXPECT_EQ(AdmittedInARow("local", "half", "a"), 15);
  Build(FailureMode::kAllow, 1);
  EXPECT_EQ(AdmittedInARow("local", "half", "b"), 15);
  EXPECT_EQ(AdmittedInARow("local", "user", "b"), 30);  // one replica: the whole limit
}

// Verifies local scales a bucket's burst too, keeps a limit of 0 at 0, and decides a
// descriptor's rules together (a denial by one consumes from none).
TEST_F(RateLimiterFailureModeTest, LocalScalesBurstKeepsZeroAndGroupsRules) {
  Build(FailureMode::kLocal, 3);
  EXPECT_EQ(AdmittedInARow("local", "bucket", "a"), 10);  // burst 30 / 3
  clock_.AdvanceMicros(1'000'000);                        // refills 3 / 3 per second
  EXPECT_EQ(AdmittedInARow("local", "bucket", "a"), 1);
  EXPECT_EQ(AdmittedInARow("local", "zero", "a"), 0);
  // Hourly 6 / 3 = 2 and per-second 30 / 3 = 10: the hour's rule denies the third.
  EXPECT_EQ(AdmittedInARow("local", "both", "a"), 2);
  Response denied = Ask("local", "both", "a");
  EXPECT_EQ(denied.statuses(0).current_limit().unit(), Response::RateLimit::HOUR);
}

// Verifies each domain's failure_mode overrides the flag, and a domain without one follows it.
TEST_F(RateLimiterFailureModeTest, DomainFailureModeOverridesTheFlag) {
  Build(FailureMode::kDeny, 3);
  EXPECT_EQ(AdmittedInARow("allow", "user", "a"), 100);
  Response denied = Ask("deny", "user", "a");
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(Ask("unset", "user", "a").overall_code(), Response::OVER_LIMIT);  // the flag
  EXPECT_EQ(AdmittedInARow("local", "user", "a"), 10);

  Build(FailureMode::kLocal, 3);
  EXPECT_EQ(AdmittedInARow("unset", "user", "b"), 10);  // the flag: local
  EXPECT_EQ(AdmittedInARow("allow", "user", "b"), 100);
  EXPECT_EQ(Ask("deny", "user", "b").overall_code(), Response::OVER_LIMIT);

  Build(FailureMode::kAllow, 3);
  EXPECT_EQ(AdmittedInARow("unset", "user", "c"), 100);
  const std::string metrics = metrics_.Serialize();
  EXPECT_THAT(metrics, HasSubstr("sluice_failure_policy_decisions_total{mode=\"allow\"} 300"));
  EXPECT_THAT(metrics, HasSubstr("sluice_failure_policy_decisions_total{mode=\"deny\"} 3"));
  EXPECT_THAT(metrics, HasSubstr("sluice_failure_policy_decisions_total{mode=\"local\"} 22"));
}

// Verifies a shadow-mode descriptor is never denied under local, though its denials count.
TEST_F(RateLimiterFailureModeTest, LocalNeverDeniesShadowModeDescriptor) {
  Build(FailureMode::kLocal, 3);  // 3 / 3: one admitted locally
  for (int i = 0; i < 5; ++i) {
    Response r = Ask("local", "beta", "a");
    EXPECT_EQ(r.overall_code(), Response::OK) << i;
    EXPECT_EQ(r.statuses(0).code(), Response::OK) << i;
  }
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("sluice_rule_shadow_mode{key=\"local.beta\"} 4"));
}

// Verifies the local state is the fallback's own: it persists across requests, takes keys the
// over-limit cache knows to be denied from the cache, and neither feeds the cache nor outlives
// the outage: once the backend is back, its shared state decides again.
TEST_F(RateLimiterFailureModeTest, LocalLeavesTheCacheAndTheSharedStateAlone) {
  OverLimitCache cache(clock_, 1000);
  Build(FailureMode::kLocal, 3, &cache);
  outage_.down = false;
  ASSERT_EQ(Ask("local", {{{"user", "x"}}}, 30).overall_code(), Response::OK);
  ASSERT_EQ(Ask("local", "user", "x").overall_code(), Response::OVER_LIMIT);  // remembered

  outage_.down = true;
  // x is still answered by the cache; y by the fallback, in the same request.
  for (int i = 0; i < 10; ++i) {
    Response r = Ask("local", {{{"user", "x"}}, {{"user", "y"}}});
    EXPECT_EQ(r.statuses(0).code(), Response::OVER_LIMIT) << i;
    EXPECT_EQ(r.statuses(1).code(), Response::OK) << i;
  }
  Response both = Ask("local", {{{"user", "x"}}, {{"user", "y"}}});
  EXPECT_EQ(both.statuses(1).code(), Response::OVER_LIMIT);

  outage_.down = false;
  // y's shared state never saw the outage's hits: all 30 are there, none denied by the cache.
  EXPECT_EQ(AdmittedInARow("local", "user", "y"), 30);
}

// Verifies the limiter reports its in-process stores for /metrics: the local store (bounded by
// local_max_bytes) once an outage has created it, and the over-limit cache.
TEST_F(RateLimiterFailureModeTest, AppendsTheMetricsOfItsStores) {
  OverLimitCache cache(clock_, 1000, 3 << 20);
  RateLimiterOptions options;
  options.failure_mode = FailureMode::kLocal;
  options.local_max_bytes = 5 << 20;
  limiter_ = std::make_unique<RateLimiter>(store_, outage_, clock_, metrics_, options, &cache);
  std::string before;
  limiter_->AppendMetrics(&before);
  EXPECT_THAT(before, ::testing::Not(HasSubstr("sluice_local_fallback_bytes")));
  EXPECT_THAT(before, HasSubstr("sluice_over_limit_cache_max_bytes 3145728\n"));
  ASSERT_EQ(Ask("local", "user", "a").overall_code(), Response::OK);  // decided locally
  std::string after;
  limiter_->AppendMetrics(&after);
  EXPECT_THAT(after, HasSubstr("sluice_local_fallback_keys 1\n"));
  EXPECT_THAT(after, HasSubstr("sluice_local_fallback_max_bytes 5242880\n"));
  EXPECT_THAT(after, ::testing::ContainsRegex("sluice_local_fallback_bytes [1-9][0-9]*\n"));
  EXPECT_THAT(after, HasSubstr("sluice_over_limit_cache_keys 0\n"));
}

// Verifies that a decision the backend failed says why on its span, in error, with the mode
// that answered, and that the local fallback's deciding is a span of its own.
TEST_F(RateLimiterFailureModeTest, TracedOutageNamesTheReasonAndTheLocalFallback) {
  Build(FailureMode::kAllow, 3);
  TracedDecision traced(clock_, TracerOptions{});
  std::vector<SpanData> spans =
      traced.Decide(*limiter_, testing::MakeRequest("local", {{{"user", "u"}}}, 0));
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].name, "local_fallback");
  EXPECT_EQ(spans[0].parent_span_id, spans[1].span_id);
  EXPECT_EQ(testing::IntAttribute(spans[0], "sluice.checks_decided"), 1);
  EXPECT_EQ(spans[1].status, SpanStatus::kError);
  EXPECT_EQ(spans[1].status_message, "redis down");
  EXPECT_EQ(testing::StringAttribute(spans[1], "sluice.failure_reason"), "connection");
  EXPECT_EQ(testing::StringAttribute(spans[1], "sluice.failure_mode"), "local");

  spans = traced.Decide(*limiter_, testing::MakeRequest("allow", {{{"user", "u"}}}, 0));
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(testing::StringAttribute(spans[0], "sluice.failure_mode"), "allow");
  EXPECT_EQ(testing::StringAttribute(spans[0], "ratelimit.overall_code"), "OK");
}

}  // namespace
}  // namespace sluice
