#include "server/config/rule_validator.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/algorithm/algorithm.h"
#include "server/common/status_macros.h"
#include "server/key/storage_key.h"

namespace sluice {
namespace {

constexpr absl::string_view kUnitChoices = "second, minute, hour, day, week, month or year";
constexpr absl::string_view kAlgorithmChoices =
    "fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket, gcra "
    "or concurrency";

constexpr int64_t kMicrosPerSecond = 1'000'000;

// What one admitted request costs a sliding_window_log key in Redis, roughly: its 16-byte
// member in a sorted set (skiplist node, dict entry, sds strings). A rule whose key could grow
// past kLargeKeyBytes is warned about: such a key slows every call on it and fills memory.
constexpr int64_t kSlidingLogBytesPerEntry = 120;
constexpr int64_t kLargeKeyBytes = int64_t{1} << 20;

const TimeUnit kAllUnits[] = {TimeUnit::kSecond, TimeUnit::kMinute, TimeUnit::kHour, TimeUnit::kDay,
                              TimeUnit::kWeek,   TimeUnit::kMonth,  TimeUnit::kYear};

std::optional<TimeUnit> ParseUnit(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (TimeUnit unit : kAllUnits) {
    if (lower == UnitName(unit)) {
      return unit;
    }
  }
  return std::nullopt;
}

bool TakesBurst(Algorithm algorithm) {
  return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket ||
         algorithm == Algorithm::kGcra;
}

// The shortest text that reads back as `value` ("0.5", "2", "1e-30").
std::string ShortestText(double value) {
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// One rule's checks, in the order their problems are reported.
class RuleChecker {
 public:
  RuleChecker(absl::string_view source, absl::string_view path, int line,
              std::vector<std::string>& warnings)
      : source_(source), path_(path), line_(line), warnings_(warnings) {}

  absl::Status Check(RuleDescription& description, RateLimitRule& rule) const;

 private:
  absl::Status Error(int line, absl::string_view field, absl::string_view what) const {
    return ConfigError(source_, line, FieldPath(path_, field), what);
  }
  void Warn(int line, absl::string_view path, absl::string_view what) const {
    warnings_.push_back(ConfigMessage(source_, line, path, what));
  }

  absl::Status CheckReplaces(Field<std::vector<ReplaceDescription>>& replaces,
                             RateLimitRule& rule) const;
  absl::Status CheckUnlimited(const RuleDescription& description) const;
  absl::Status CheckLimit(RuleDescription& description, RateLimitRule& rule) const;
  absl::StatusOr<Algorithm> CheckAlgorithm(const Field<std::string>& algorithm) const;
  absl::Status CheckCharge(const Field<std::string>& charge, RateLimitRule& rule) const;
  absl::Status CheckUnitMultiplier(const Field<uint32_t>& multiplier, RateLimitRule& rule) const;
  absl::StatusOr<uint64_t> CheckBurst(const Field<uint32_t>& burst, Algorithm algorithm,
                                      uint32_t limit) const;
  absl::Status CheckLocalShare(const Field<double>& share, RateLimitRule& rule) const;
  void WarnOfLargeSlidingLog(const RateLimitRule& rule) const;

  const absl::string_view source_;
  const absl::string_view path_;
  const int line_;  // the rule's
  std::vector<std::string>& warnings_;
};

absl::Status RuleChecker::Check(RuleDescription& description, RateLimitRule& rule) const {
  RETURN_IF_ERROR(description.read_error);
  RETURN_IF_ERROR(description.unlimited.read_error);
  rule.unlimited = description.unlimited.value;
  RETURN_IF_ERROR(description.name.read_error);
  rule.name = std::move(description.name.value);
  RETURN_IF_ERROR(CheckReplaces(description.replaces, rule));
  if (description.hash_tag.given) {
    RETURN_IF_ERROR(description.hash_tag.read_error);
    if (description.hash_tag.value.empty()) {
      return Error(description.hash_tag.line, "hash_tag",
                   "must name a descriptor entry key (e.g. user_id), not be empty");
    }
    rule.hash_tag = std::move(description.hash_tag.value);
    rule.params.hash_tagged = true;
  }
  if (rule.unlimited) {
    return CheckUnlimited(description);
  }
  RETURN_IF_ERROR(CheckLimit(description, rule));
  ASSIGN_OR_RETURN(const Algorithm algorithm, CheckAlgorithm(description.algorithm));
  RETURN_IF_ERROR(CheckUnitMultiplier(description.unit_multiplier, rule));
  ASSIGN_OR_RETURN(const uint64_t burst,
                   CheckBurst(description.burst, algorithm, rule.requests_per_unit));
  RETURN_IF_ERROR(CheckLocalShare(description.local_share, rule));
  RETURN_IF_ERROR(CheckCharge(description.charge, rule));

  const int64_t period_seconds =
      UnitSeconds(rule.unit) * static_cast<int64_t>(rule.unit_multiplier);
  rule.params.algorithm = algorithm;
  rule.params.limit = rule.requests_per_unit;
  rule.params.period_us = period_seconds * kMicrosPerSecond;
  rule.params.burst = burst;
  rule.key_suffix = RuleKeySuffix(algorithm, period_seconds);
  WarnOfLargeSlidingLog(rule);
  return absl::OkStatus();
}

absl::Status RuleChecker::CheckReplaces(Field<std::vector<ReplaceDescription>>& replaces,
                                        RateLimitRule& rule) const {
  RETURN_IF_ERROR(replaces.read_error);
  const std::string path = FieldPath(path_, "replaces");
  for (size_t i = 0; i < replaces.value.size(); ++i) {
    ReplaceDescription& entry = replaces.value[i];
    RETURN_IF_ERROR(entry.read_error);
    RETURN_IF_ERROR(entry.name.read_error);
    const std::string name_path = FieldPath(ItemPath(path, i), "name");
    if (entry.name.value.empty()) {
      return ConfigError(source_, entry.name.given ? entry.name.line : entry.line, name_path,
                         "must be a non-empty rule name");
    }
    if (entry.name.value == rule.name) {
      return ConfigError(source_, entry.name.line, name_path,
                         absl::StrCat("a rule cannot replace itself (", Quoted(entry.name.value),
                                      ")"));
    }
    rule.replaces.push_back(std::move(entry.name.value));
  }
  return absl::OkStatus();
}

absl::Status RuleChecker::CheckUnlimited(const RuleDescription& description) const {
  struct LimitField {
    absl::string_view name;
    bool given;
    int line;
  };
  const LimitField limit_fields[] = {
      {"unit", description.unit.given, description.unit.line},
      {"algorithm", description.algorithm.given, description.algorithm.line},
      {"burst", description.burst.given, description.burst.line},
      {"unit_multiplier", description.unit_multiplier.given, description.unit_multiplier.line},
      {"hash_tag", description.hash_tag.given, description.hash_tag.line},
      {"local_share", description.local_share.given, description.local_share.line},
      {"charge", description.charge.given, description.charge.line},
  };
  for (const LimitField& field : limit_fields) {
    if (field.given) {
      return Error(field.line, field.name, "must not be set when unlimited is true");
    }
  }
  if (description.requests_per_unit.given) {
    // envoyproxy/ratelimit ignores the number (not even its type is checked); so does Sluice,
    // but says so.
    Warn(description.requests_per_unit.line, FieldPath(path_, "requests_per_unit"),
         "ignored: the rule is unlimited (remove requests_per_unit or unlimited)");
  }
  return absl::OkStatus();
}

absl::Status RuleChecker::CheckLimit(RuleDescription& description, RateLimitRule& rule) const {
  const Field<std::string>& unit = description.unit;
  if (!unit.given) {
    return Error(line_, "unit", absl::StrCat("missing (expected ", kUnitChoices, ")"));
  }
  RETURN_IF_ERROR(unit.read_error);
  const std::optional<TimeUnit> parsed = ParseUnit(unit.value);
  if (!parsed.has_value()) {
    return Error(unit.line, "unit",
                 absl::StrCat("invalid unit ", Quoted(unit.value), " (expected ", kUnitChoices,
                              ")"));
  }
  rule.unit = *parsed;

  const Field<uint32_t>& requests = description.requests_per_unit;
  if (!requests.given) {
    // envoyproxy/ratelimit reads a missing number as 0: every request is over the limit.
    Warn(line_, FieldPath(path_, "requests_per_unit"),
         "missing: the limit is 0, so every request with hits is OVER_LIMIT");
    rule.requests_per_unit = 0;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(requests.read_error);
  rule.requests_per_unit = requests.value;
  return absl::OkStatus();
}

absl::Status RuleChecker::CheckCharge(const Field<std::string>& charge,
                                      RateLimitRule& rule) const {
  if (!charge.given) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(charge.read_error);
  const std::optional<Charge> parsed = ParseCharge(absl::AsciiStrToLower(charge.value));
  if (!parsed.has_value()) {
    return Error(charge.line, "charge",
                 absl::StrCat("invalid charge ", Quoted(charge.value),
                              " (expected if_admitted: a denied request consumes nothing, or "
                              "always: every hit asked is charged, past the limit)"));
  }
  rule.charge = *parsed;
  return absl::OkStatus();
}

absl::StatusOr<Algorithm> RuleChecker::CheckAlgorithm(const Field<std::string>& algorithm) const {
  if (!algorithm.given) {
    return Algorithm::kFixedWindow;
  }
  RETURN_IF_ERROR(algorithm.read_error);
  const std::optional<Algorithm> parsed = ParseAlgorithm(absl::AsciiStrToLower(algorithm.value));
  if (!parsed.has_value()) {
    return Error(algorithm.line, "algorithm",
                 absl::StrCat("invalid algorithm ", Quoted(algorithm.value), " (expected ",
                              kAlgorithmChoices, ")"));
  }
  return *parsed;
}

absl::Status RuleChecker::CheckUnitMultiplier(const Field<uint32_t>& multiplier,
                                              RateLimitRule& rule) const {
  if (!multiplier.given) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(multiplier.read_error);
  if (multiplier.value < 1) {
    return Error(multiplier.line, "unit_multiplier", "must be at least 1");
  }
  // Periods stay within 2^50 microseconds (35.7 years): the Lua scripts compute in doubles,
  // and every time their retry search visits must stay below 2^53 to be exact.
  const int64_t max_multiplier = (int64_t{1} << 50) / kMicrosPerSecond / UnitSeconds(rule.unit);
  if (multiplier.value > max_multiplier) {
    return Error(
        multiplier.line, "unit_multiplier",
        absl::StrCat("period too long: at most ", max_multiplier, " ", UnitName(rule.unit), "s"));
  }
  rule.unit_multiplier = multiplier.value;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RuleChecker::CheckBurst(const Field<uint32_t>& burst, Algorithm algorithm,
                                                 uint32_t limit) const {
  if (!burst.given) {
    return uint64_t{limit};
  }
  if (!TakesBurst(algorithm)) {
    return Error(burst.line, "burst",
                 absl::StrCat("not allowed with algorithm ", AlgorithmName(algorithm),
                              " (only token_bucket, leaky_bucket and gcra have a burst)"));
  }
  RETURN_IF_ERROR(burst.read_error);
  if (burst.value < 1) {
    return Error(burst.line, "burst", "must be at least 1");
  }
  return uint64_t{burst.value};
}

absl::Status RuleChecker::CheckLocalShare(const Field<double>& share, RateLimitRule& rule) const {
  if (!share.given) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(share.read_error);
  if (!(share.value > 0 && share.value <= 1)) {
    return Error(share.line, "local_share",
                 absl::StrCat(ShortestText(share.value),
                              " is out of range (more than 0 and at most 1: the fraction of the "
                              "limit one replica admits on its own)"));
  }
  rule.local_share = share.value;
  return absl::OkStatus();
}

void RuleChecker::WarnOfLargeSlidingLog(const RateLimitRule& rule) const {
  if (Engine(rule.params.algorithm) != Algorithm::kSlidingWindowLog) {
    return;
  }
  const int64_t key_bytes = int64_t{rule.requests_per_unit} * kSlidingLogBytesPerEntry;
  if (key_bytes <= kLargeKeyBytes) {
    return;
  }
  Warn(line_, path_,
       absl::StrCat("sliding_window_log keeps one entry per admitted request, so one key can "
                    "grow to ",
                    rule.requests_per_unit, " entries, about ", (key_bytes + (1 << 19)) >> 20,
                    " MiB in Redis (~", kSlidingLogBytesPerEntry, " bytes each; warned above ",
                    kLargeKeyBytes >> 20,
                    " MiB); sliding_window_counter keeps two counters per key, or use a "
                    "shorter unit with a proportionally smaller requests_per_unit"));
}

// Refuses `rule` (at `index` of the list at `path`) beside the rules already on the descriptor.
absl::Status CheckBesideEarlierRules(const RateLimitRule& rule, size_t index,
                                     const std::vector<RateLimitRule>& earlier,
                                     const std::vector<RuleDescription>& descriptions,
                                     absl::string_view source, absl::string_view path) {
  const int line = descriptions[index].line;
  for (size_t j = 0; j < earlier.size(); ++j) {
    if (rule.unlimited || earlier[j].unlimited) {
      return ConfigError(source, line, ItemPath(path, index),
                         "an unlimited rule must be the only rule of its descriptor");
    }
    if (earlier[j].params.algorithm == rule.params.algorithm &&
        earlier[j].params.period_us == rule.params.period_us) {
      return ConfigError(
          source, line, ItemPath(path, index),
          absl::StrCat("same algorithm (", AlgorithmName(rule.params.algorithm), ") and period (",
                       rule.params.period_us / kMicrosPerSecond, "s) as ", ItemPath(path, j),
                       descriptions[j].line > 0 ? absl::StrCat(" at line ", descriptions[j].line)
                                                : std::string(),
                       "; two such rules would share one counter"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRuleList(Field<std::vector<RuleDescription>>& list, absl::string_view source,
                              absl::string_view path, std::vector<std::string>& warnings,
                              std::vector<RateLimitRule>& rules) {
  RETURN_IF_ERROR(list.read_error);
  if (list.value.empty()) {
    return ConfigError(source, list.line, path,
                       "expected a non-empty list of rate limits, got an empty list");
  }
  for (size_t i = 0; i < list.value.size(); ++i) {
    ASSIGN_OR_RETURN(RateLimitRule rule,
                     ValidateRule(list.value[i], source, ItemPath(path, i), warnings));
    RETURN_IF_ERROR(CheckBesideEarlierRules(rule, i, rules, list.value, source, path));
    rule.params.shares_descriptor = list.value.size() > 1;
    rules.push_back(std::move(rule));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RateLimitRule> ValidateRule(RuleDescription& description, absl::string_view source,
                                           absl::string_view path,
                                           std::vector<std::string>& warnings) {
  RateLimitRule rule;
  RETURN_IF_ERROR(RuleChecker(source, path, description.line, warnings).Check(description, rule));
  return rule;
}

absl::Status ValidateDescriptorRules(DescriptorDescription& descriptor, absl::string_view source,
                                     absl::string_view path, std::vector<std::string>& warnings,
                                     std::vector<RateLimitRule>& rules) {
  if (descriptor.rate_limit.has_value() && descriptor.rate_limits.given) {
    return ConfigError(source, std::max(descriptor.rate_limit->line, descriptor.rate_limits.line),
                       path,
                       "rate_limit and rate_limits are mutually exclusive (put every rule in "
                       "rate_limits)");
  }
  if (descriptor.rate_limit.has_value()) {
    ASSIGN_OR_RETURN(RateLimitRule rule, ValidateRule(*descriptor.rate_limit, source,
                                                      FieldPath(path, "rate_limit"), warnings));
    rules.push_back(std::move(rule));
    return absl::OkStatus();
  }
  if (descriptor.rate_limits.given) {
    return ValidateRuleList(descriptor.rate_limits, source, FieldPath(path, "rate_limits"),
                            warnings, rules);
  }
  return absl::OkStatus();
}

}  // namespace sluice
