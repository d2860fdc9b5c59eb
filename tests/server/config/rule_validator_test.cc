#include "server/config/rule_validator.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

template <typename T>
Field<T> Given(T value, int line) {
  Field<T> field;
  field.given = true;
  field.value = std::move(value);
  field.line = line;
  return field;
}

// A rule at line 10 whose fields are each on their own line: unit 11, requests_per_unit 12.
RuleDescription Rule(std::string unit, uint32_t requests_per_unit) {
  RuleDescription rule;
  rule.line = 10;
  rule.unit = Given(std::move(unit), 11);
  rule.requests_per_unit = Given(requests_per_unit, 12);
  return rule;
}

class RuleValidatorTest : public ::testing::Test {
 protected:
  absl::StatusOr<RateLimitRule> Validate(RuleDescription rule) {
    return ValidateRule(rule, "r.yaml", "descriptors[0].rate_limit", warnings_);
  }
  std::string Error(RuleDescription rule) {
    absl::StatusOr<RateLimitRule> built = Validate(std::move(rule));
    if (built.ok()) {
      return "";
    }
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(built.status().message());
  }

  std::vector<std::string> warnings_;
};

// Verifies the derived fields: period from unit and multiplier, burst defaulting to the limit,
// the key suffix, and the algorithm's name read in any case.
TEST_F(RuleValidatorTest, DerivesParams) {
  absl::StatusOr<RateLimitRule> rule = Validate(Rule("Minute", 50));
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_EQ(rule->unit, TimeUnit::kMinute);
  EXPECT_EQ(rule->requests_per_unit, 50u);
  EXPECT_EQ(rule->params.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(rule->params.limit, 50u);
  EXPECT_EQ(rule->params.period_us, 60'000'000);
  EXPECT_EQ(rule->params.burst, 50u);
  EXPECT_EQ(rule->key_suffix, "fw:60");
  EXPECT_FALSE(rule->local_share.has_value());

  RuleDescription bucket = Rule("hour", 7);
  bucket.algorithm = Given(std::string("GCRA"), 13);
  bucket.unit_multiplier = Given(uint32_t{3}, 14);
  bucket.burst = Given(uint32_t{9}, 15);
  bucket.local_share = Given(0.5, 16);
  bucket.hash_tag = Given(std::string("user_id"), 17);
  rule = Validate(std::move(bucket));
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_EQ(rule->params.algorithm, Algorithm::kGcra);
  EXPECT_EQ(rule->unit_multiplier, 3u);
  EXPECT_EQ(rule->params.period_us, int64_t{3 * 3600} * 1'000'000);
  EXPECT_EQ(rule->params.burst, 9u);
  EXPECT_EQ(rule->key_suffix, "gcra:10800");
  EXPECT_EQ(rule->local_share, 0.5);
  EXPECT_EQ(rule->hash_tag, "user_id");
  EXPECT_THAT(warnings_, IsEmpty());
}

// Verifies a missing unit is refused at the rule's line, an unknown one at its own.
TEST_F(RuleValidatorTest, RefusesMissingOrUnknownUnit) {
  RuleDescription missing = Rule("second", 1);
  missing.unit = Field<std::string>();
  EXPECT_EQ(Error(std::move(missing)),
            "r.yaml:10: descriptors[0].rate_limit.unit: missing (expected second, minute, hour, "
            "day, week, month or year)");
  EXPECT_EQ(Error(Rule("fortnight", 1)),
            "r.yaml:11: descriptors[0].rate_limit.unit: invalid unit 'fortnight' (expected "
            "second, minute, hour, day, week, month or year)");
}

// Verifies a missing requests_per_unit is a limit of 0, with a warning at the rule's line.
TEST_F(RuleValidatorTest, MissingLimitIsZeroWithWarning) {
  RuleDescription blocked = Rule("hour", 1);
  blocked.requests_per_unit = Field<uint32_t>();
  absl::StatusOr<RateLimitRule> rule = Validate(std::move(blocked));
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_EQ(rule->params.limit, 0u);
  EXPECT_THAT(warnings_, ElementsAre("r.yaml:10: descriptors[0].rate_limit.requests_per_unit: "
                                     "missing: the limit is 0, so every request with hits is "
                                     "OVER_LIMIT"));
}

// Verifies algorithm, burst and unit_multiplier checks, each at its own line.
TEST_F(RuleValidatorTest, RefusesBadAlgorithmBurstAndPeriod) {
  RuleDescription leaky = Rule("second", 5);
  leaky.algorithm = Given(std::string("leaky"), 13);
  EXPECT_EQ(Error(std::move(leaky)),
            "r.yaml:13: descriptors[0].rate_limit.algorithm: invalid algorithm 'leaky' "
            "(expected fixed_window, sliding_window_log, sliding_window_counter, token_bucket, "
            "leaky_bucket, gcra or concurrency)");
  RuleDescription window = Rule("second", 5);
  window.burst = Given(uint32_t{10}, 15);
  EXPECT_EQ(Error(std::move(window)),
            "r.yaml:15: descriptors[0].rate_limit.burst: not allowed with algorithm "
            "fixed_window (only token_bucket, leaky_bucket and gcra have a burst)");
  RuleDescription leases = Rule("second", 5);
  leases.algorithm = Given(std::string("concurrency"), 13);
  leases.burst = Given(uint32_t{10}, 15);
  EXPECT_EQ(Error(std::move(leases)),
            "r.yaml:15: descriptors[0].rate_limit.burst: not allowed with algorithm "
            "concurrency (only token_bucket, leaky_bucket and gcra have a burst)");
  RuleDescription zero_burst = Rule("second", 5);
  zero_burst.algorithm = Given(std::string("token_bucket"), 13);
  zero_burst.burst = Given(uint32_t{0}, 15);
  EXPECT_EQ(Error(std::move(zero_burst)),
            "r.yaml:15: descriptors[0].rate_limit.burst: must be at least 1");
  RuleDescription zero_multiplier = Rule("second", 5);
  zero_multiplier.unit_multiplier = Given(uint32_t{0}, 14);
  EXPECT_EQ(Error(std::move(zero_multiplier)),
            "r.yaml:14: descriptors[0].rate_limit.unit_multiplier: must be at least 1");
  RuleDescription long_period = Rule("year", 5);
  long_period.unit_multiplier = Given(uint32_t{36}, 14);
  EXPECT_EQ(Error(std::move(long_period)),
            "r.yaml:14: descriptors[0].rate_limit.unit_multiplier: period too long: at most 35 "
            "years");
}

// Verifies local_share must be more than 0 and at most 1, the number written in its shortest
// form.
TEST_F(RuleValidatorTest, RefusesLocalShareOutOfRange) {
  auto error = [this](double share) {
    RuleDescription rule = Rule("second", 5);
    rule.local_share = Given(share, 16);
    return Error(std::move(rule));
  };
  const std::string tail =
      " is out of range (more than 0 and at most 1: the fraction of the limit one replica "
      "admits on its own)";
  EXPECT_EQ(error(0), "r.yaml:16: descriptors[0].rate_limit.local_share: 0" + tail);
  EXPECT_EQ(error(-0.5), "r.yaml:16: descriptors[0].rate_limit.local_share: -0.5" + tail);
  EXPECT_EQ(error(1.0000001), "r.yaml:16: descriptors[0].rate_limit.local_share: 1.0000001" + tail);
  EXPECT_EQ(error(1), "");
  EXPECT_EQ(error(1e-9), "");
}

// Verifies an unlimited rule takes no field that describes a limit, and ignores
// requests_per_unit with a warning.
TEST_F(RuleValidatorTest, UnlimitedRuleTakesNoLimitFields) {
  RuleDescription free;
  free.line = 10;
  free.unlimited = Given(true, 11);
  free.algorithm = Given(std::string("gcra"), 12);
  EXPECT_EQ(Error(free),
            "r.yaml:12: descriptors[0].rate_limit.algorithm: must not be set when unlimited is "
            "true");
  free.algorithm = Field<std::string>();
  free.requests_per_unit = Given(uint32_t{25}, 13);
  free.name = Given(std::string("free"), 14);
  absl::StatusOr<RateLimitRule> rule = Validate(free);
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_TRUE(rule->unlimited);
  EXPECT_EQ(rule->name, "free");
  EXPECT_THAT(warnings_, ElementsAre("r.yaml:13: descriptors[0].rate_limit.requests_per_unit: "
                                     "ignored: the rule is unlimited (remove requests_per_unit "
                                     "or unlimited)"));
}

// Verifies hash_tag must not be empty, and replaces names other rules, never the rule itself.
TEST_F(RuleValidatorTest, ChecksHashTagAndReplaces) {
  RuleDescription tagged = Rule("second", 5);
  tagged.hash_tag = Given(std::string(), 17);
  EXPECT_EQ(Error(std::move(tagged)),
            "r.yaml:17: descriptors[0].rate_limit.hash_tag: must name a descriptor entry key "
            "(e.g. user_id), not be empty");

  auto replacing = [](std::vector<std::string> names) {
    RuleDescription rule = Rule("second", 5);
    rule.name = Given(std::string("mine"), 13);
    rule.replaces = Given(std::vector<ReplaceDescription>{}, 18);
    int line = 19;
    for (std::string& name : names) {
      ReplaceDescription entry;
      entry.line = line;
      if (!name.empty()) {
        entry.name = Given(std::move(name), line);
      }
      rule.replaces.value.push_back(std::move(entry));
      ++line;
    }
    return rule;
  };
  EXPECT_EQ(Error(replacing({"other", ""})),
            "r.yaml:20: descriptors[0].rate_limit.replaces[1].name: must be a non-empty rule "
            "name");
  EXPECT_EQ(Error(replacing({"mine"})),
            "r.yaml:19: descriptors[0].rate_limit.replaces[0].name: a rule cannot replace "
            "itself ('mine')");
  absl::StatusOr<RateLimitRule> rule = Validate(replacing({"a", "b"}));
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_THAT(rule->replaces, ElementsAre("a", "b"));
}

// Verifies a source's read errors are returned in the order the checks reach them.
TEST_F(RuleValidatorTest, ReturnsReadErrorsInCheckOrder) {
  RuleDescription rule = Rule("fortnight", 5);
  rule.burst.given = true;
  rule.burst.line = 15;
  rule.burst.read_error = absl::InvalidArgumentError("r.yaml:15: burst: unreadable");
  EXPECT_EQ(Error(rule),
            "r.yaml:11: descriptors[0].rate_limit.unit: invalid unit 'fortnight' "
            "(expected second, minute, hour, day, week, month or year)");
  rule.unit = Given(std::string("second"), 11);
  rule.algorithm = Given(std::string("token_bucket"), 13);
  EXPECT_EQ(Error(rule), "r.yaml:15: burst: unreadable");
  rule.read_error = absl::InvalidArgumentError("r.yaml:10: not a map");
  EXPECT_EQ(Error(rule), "r.yaml:10: not a map");
}

// Verifies a sliding_window_log rule whose key can pass 1 MiB is warned about.
TEST_F(RuleValidatorTest, WarnsOfLargeSlidingWindowLogKeys) {
  RuleDescription small = Rule("hour", 8738);
  small.algorithm = Given(std::string("sliding_window_log"), 13);
  ASSERT_TRUE(Validate(std::move(small)).ok());
  EXPECT_THAT(warnings_, IsEmpty());
  RuleDescription large = Rule("hour", 8739);
  large.algorithm = Given(std::string("sliding_window_log"), 13);
  ASSERT_TRUE(Validate(std::move(large)).ok());
  EXPECT_THAT(warnings_, ElementsAre(::testing::StartsWith(
                             "r.yaml:10: descriptors[0].rate_limit: sliding_window_log keeps one "
                             "entry per admitted request, so one key can grow to 8739 entries")));
}

// Verifies a descriptor's rules among themselves: rate_limit or rate_limits, a non-empty list,
// one unlimited rule alone, and no two rules sharing an algorithm and a period.
TEST_F(RuleValidatorTest, ChecksTheRulesOfOneDescriptor) {
  std::vector<std::string> warnings;
  std::vector<RateLimitRule> rules;
  auto error = [&](DescriptorDescription descriptor) {
    rules.clear();
    absl::Status status =
        ValidateDescriptorRules(descriptor, "r.yaml", "descriptors[2]", warnings, rules);
    return std::string(status.message());
  };
  auto with_rules = [](std::vector<RuleDescription> list) {
    DescriptorDescription descriptor;
    descriptor.rate_limits = Given(std::move(list), 4);
    return descriptor;
  };

  DescriptorDescription both = with_rules({Rule("second", 1)});
  both.rate_limit = Rule("second", 1);
  both.rate_limit->line = 3;
  EXPECT_EQ(error(both),
            "r.yaml:4: descriptors[2]: rate_limit and rate_limits are mutually exclusive (put "
            "every rule in rate_limits)");
  EXPECT_EQ(error(with_rules({})),
            "r.yaml:4: descriptors[2].rate_limits: expected a non-empty list of rate limits, "
            "got an empty list");

  RuleDescription seconds = Rule("second", 100);
  seconds.line = 5;
  seconds.unit_multiplier = Given(uint32_t{60}, 5);
  RuleDescription minute = Rule("minute", 10);
  minute.line = 8;
  EXPECT_EQ(error(with_rules({seconds, minute})),
            "r.yaml:8: descriptors[2].rate_limits[1]: same algorithm (fixed_window) and period "
            "(60s) as descriptors[2].rate_limits[0] at line 5; two such rules would share one "
            "counter");
  RuleDescription free;
  free.line = 8;
  free.unlimited = Given(true, 8);
  EXPECT_EQ(error(with_rules({seconds, free})),
            "r.yaml:8: descriptors[2].rate_limits[1]: an unlimited rule must be the only rule of "
            "its descriptor");
  minute.algorithm = Given(std::string("token_bucket"), 9);
  EXPECT_EQ(error(with_rules({seconds, minute})), "");
  EXPECT_EQ(rules.size(), 2u);
  EXPECT_EQ(error(DescriptorDescription()), "");
  EXPECT_TRUE(rules.empty());
}

}  // namespace
}  // namespace sluice
