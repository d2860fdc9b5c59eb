// The Envoy rate-limit filter emulator against a table of Envoy's cases, each read from
// envoyproxy/envoy's source/extensions/filters/http/ratelimit/ratelimit.cc (decodeHeaders,
// initiateCall, populateRateLimitDescriptors, complete, onDestroy).
#include "tests/support/envoy_ratelimit_filter.h"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::testing {
namespace {

using Filter = EnvoyRateLimitFilter;

struct FilterCase {
  std::string name;
  Filter::Config config;
  bool decode_headers = true;     // false: a local reply earlier in the chain
  bool request_descriptors = true;
  bool stream_done_descriptors = true;
  // The service's answer; nullopt: the stream ends while the call is in flight.
  std::optional<Filter::LimitStatus> answer;
  // Expected: the request-path call is sent, the request goes upstream, the release is sent.
  bool calls = true;
  bool proceeds = true;
  bool releases = true;
};

void PrintTo(const FilterCase& c, std::ostream* os) { *os << c.name; }

Filter::Config Config(bool enabled = true, bool failure_mode_deny = false, bool enforced = true) {
  return Filter::Config{enabled, failure_mode_deny, enforced};
}

std::vector<FilterCase> Cases() {
  using S = Filter::LimitStatus;
  return {
      {"admitted", Config(), true, true, true, S::kOk, true, true, true},
      // complete(OverLimit) with enforced(): Responded and a 429; onDestroy still sends.
      {"denied", Config(), true, true, true, S::kOverLimit, true, false, true},
      {"denied_not_enforced", Config(true, false, false), true, true, true, S::kOverLimit, true,
       true, true},
      // complete(Error): failureModeAllow() continues; otherwise Responded with 500. Both release.
      {"error_failure_mode_allow", Config(), true, true, true, S::kError, true, true, true},
      {"error_failure_mode_deny", Config(true, true), true, true, true, S::kError, true, false,
       true},
      // onDestroy with state_ == Calling: client_->cancel(), nothing sent.
      {"reset_while_calling", Config(), true, true, true, std::nullopt, true, false, false},
      // !config_->enabled(): decodeHeaders continues before initiateCall, so route_ is never
      // kept and stream done makes no descriptor.
      {"filter_disabled", Config(false), true, true, true, std::nullopt, false, true, false},
      // request_headers_ unset: "If decodeHeaders is not called because of a local reply".
      {"no_decode_headers", Config(), false, true, true, std::nullopt, false, false, false},
      // No request-path descriptor: no call, but the route is kept and stream done sends.
      {"stream_done_only", Config(), true, false, true, std::nullopt, false, true, true},
      {"no_stream_done_rate_limit", Config(), true, true, false, S::kOk, true, true, false},
  };
}

class EnvoyRateLimitFilterTest : public ::testing::TestWithParam<FilterCase> {};

// Verifies the emulator makes Envoy's calls, and lets the request through, as Envoy's source does.
TEST_P(EnvoyRateLimitFilterTest, MakesEnvoysCalls) {
  const FilterCase& c = GetParam();
  Filter filter(c.config);
  bool calls = false;
  bool proceeds = false;
  if (c.decode_headers) {
    calls = filter.DecodeHeaders(c.request_descriptors);
    proceeds = !calls;  // without a call, decodeHeaders continues
    if (calls && c.answer.has_value()) {
      proceeds = filter.Complete(*c.answer);
    }
  }
  EXPECT_EQ(calls, c.calls);
  EXPECT_EQ(proceeds, c.proceeds);
  EXPECT_EQ(filter.OnDestroy(c.stream_done_descriptors), c.releases);
}

INSTANTIATE_TEST_SUITE_P(Envoy, EnvoyRateLimitFilterTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FilterCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace sluice::testing
