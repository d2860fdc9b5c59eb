// examples/envoyproxy-ratelimit/config, loaded as envoyproxy/ratelimit's runtime directory is
// loaded, answers each of its README's eleven examples as that README says.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backend/memory_backend.h"
#include "tests/support/fake_clock.h"
#include "server/config/config_loader.h"
#include "server/service/rate_limiter.h"
#include "tests/server/service/request_builder.h"
#include "tests/support/paths.h"

namespace sluice {
namespace {

using Response = RateLimiter::Response;
using Request = RateLimiter::Request;
using testing::Entries;

class EnvoyproxyExamplesTest : public ::testing::Test {
 protected:
  EnvoyproxyExamplesTest() : store_(Load()), backend_(clock_) {
    limiter_ =
        std::make_unique<RateLimiter>(store_, backend_, clock_, metrics_, RateLimiterOptions());
  }

  static std::shared_ptr<const Config> Load() {
    ConfigLoadOptions runtime;
    runtime.recursive = true;
    runtime.ignore_dot_files = false;  // upstream's default
    auto config =
        LoadConfigPath(testing::SourceDir() + "/examples/envoyproxy-ratelimit/config",
                       runtime);
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) {
      return std::make_shared<Config>();
    }
    EXPECT_TRUE((*config)->warnings().empty());
    return std::shared_ptr<const Config>(std::move(*config));
  }

  Response Decide(absl::string_view domain, const std::vector<Entries>& descriptors,
                  uint32_t hits = 0) {
    absl::StatusOr<Response> response =
        testing::DecideInline(*limiter_, testing::MakeRequest(domain, descriptors, hits));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : Response();
  }

  // The requests_per_unit the descriptor was answered with; -1 without a limit.
  int Limit(absl::string_view domain, const Entries& descriptor) {
    Response r = Decide(domain, {descriptor});
    return r.statuses(0).has_current_limit()
               ? static_cast<int>(r.statuses(0).current_limit().requests_per_unit())
               : -1;
  }

  bool HasStat(absl::string_view key) {
    return absl::StrContains(metrics_.Serialize(),
                             absl::StrCat("sluice_rule_total_hits{key=\"", key, "\"}"));
  }

  FakeClock clock_{1700006400000000};
  ConfigStore store_;
  MemoryBackend backend_;
  Metrics metrics_;
  std::unique_ptr<RateLimiter> limiter_;
};

// Verifies examples 1-4: values, nesting with several descriptors, matching order, depth.
TEST_F(EnvoyproxyExamplesTest, MatchingExamples) {
  EXPECT_EQ(Limit("orders_db", {{"table", "orders"}}), 300);
  EXPECT_EQ(Limit("orders_db", {{"table", "items"}}), -1);

  Response both = Decide("notifications", {{{"channel", "promo"}, {"recipient", "555"}},
                                           {{"recipient", "555"}}});
  EXPECT_EQ(both.statuses(0).current_limit().requests_per_unit(), 3u);
  EXPECT_EQ(both.statuses(1).current_limit().requests_per_unit(), 50u);
  Decide("notifications", {{{"channel", "promo"}, {"recipient", "555"}}}, 2);
  Response fourth = Decide("notifications", {{{"channel", "promo"}, {"recipient", "555"}},
                                             {{"recipient", "555"}}});
  EXPECT_EQ(fourth.overall_code(), Response::OVER_LIMIT);  // a logical OR of the two
  EXPECT_EQ(fourth.statuses(1).code(), Response::OK);

  EXPECT_EQ(Limit("gateway_per_ip", {{"client_ip", "198.51.100.1"}}), 20);
  EXPECT_EQ(Decide("gateway_per_ip", {{{"client_ip", "203.0.113.9"}}}).overall_code(),
            Response::OVER_LIMIT);

  EXPECT_EQ(Limit("depth", {{"tier", "gold"}, {"region", "eu"}}), 200);
  EXPECT_EQ(Limit("depth", {{"tier", "gold"}}), -1);
}

// Verifies examples 5-7: unlimited, shadow mode, replaces.
TEST_F(EnvoyproxyExamplesTest, RuleKindExamples) {
  Response sso = Decide("backoffice", {{{"sso", "x"}}});
  EXPECT_EQ(sso.statuses(0).limit_remaining(), 4294967295u);
  EXPECT_EQ(Limit("backoffice", {{"billing", "x"}}), 60);

  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(Decide("soft_launch", {{{"app", "a"}, {"account", "trial-1"}}}).overall_code(),
              Response::OK);
  }
  EXPECT_THAT(metrics_.Serialize(),
              ::testing::HasSubstr(
                  "sluice_rule_shadow_mode{key=\"soft_launch.app.account_trial-1\"} 2"));

  Response replaced = Decide("overrides", {{{"team", "search"}, {"user", "ana"}},
                                           {{"plan", "premium"}, {"user", "ana"}}});
  EXPECT_FALSE(replaced.statuses(0).has_current_limit());
  EXPECT_EQ(replaced.statuses(1).current_limit().requests_per_unit(), 12u);
  EXPECT_EQ(Limit("overrides", {{"team", "search"}, {"user", "ana"}}), 4);
}

// Verifies examples 8-11: detailed_metric, wildcards, value_to_metric, share_threshold.
TEST_F(EnvoyproxyExamplesTest, MetricAndWildcardExamples) {
  Decide("detailed", {{{"tenant", "acme"}}});
  Decide("detailed", {{{"tenant", "internal"}}});
  EXPECT_TRUE(HasStat("detailed.tenant_acme"));
  EXPECT_TRUE(HasStat("detailed.tenant_internal"));
  EXPECT_FALSE(HasStat("detailed.tenant"));

  EXPECT_EQ(Limit("wildcards", {{"build", "release-7"}}), 10);
  EXPECT_EQ(Limit("wildcards", {{"path", "/v1/42/refund"}}), 10);
  EXPECT_EQ(Limit("wildcards", {{"path", "/v1/42/other"}}), -1);
  EXPECT_EQ(Limit("wildcards", {{"route", "/shop/de/item/9/buy"}}), 10);

  Decide("by_value", {{{"service", "cart"}, {"verb", "PUT"}, {"caller", "c1"}}});
  EXPECT_TRUE(HasStat("by_value.service_cart.verb_PUT.caller"));
  Decide("by_value_wildcard", {{{"member", "bo"}, {"op", "getfile"}, {"object", "o"}}});
  EXPECT_TRUE(HasStat("by_value_wildcard.member_bo.op_getfile.object"));

  for (const char* report : {"reports/a", "reports/b", "reports/c"}) {
    EXPECT_EQ(Decide("shared", {{{"report", report}}}, 2).overall_code(), Response::OK);
  }
  EXPECT_EQ(Decide("shared", {{{"report", "reports/d"}}}).overall_code(), Response::OVER_LIMIT);
  EXPECT_TRUE(HasStat("shared.report_reports/*"));
  EXPECT_EQ(Decide("shared", {{{"export", "exports/a"}}}, 6).overall_code(), Response::OK);
  EXPECT_EQ(Decide("shared", {{{"export", "exports/b"}}}, 6).overall_code(), Response::OK);

  Decide("shared_metrics", {{{"endpoint", "v2/users"}, {"method", "GET"}}});
  EXPECT_TRUE(HasStat("shared_metrics.endpoint_v2/*.method"));
}

}  // namespace
}  // namespace sluice
