#include "server/xds/xds_config_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "server/common/log_text.h"

namespace sluice {
namespace {

namespace rls = ::ratelimit::config::ratelimit::v3;
using google::protobuf::Struct;
using google::protobuf::Value;

// RateLimitUnit's values, for a number it does not name.
constexpr absl::string_view kUnitNumbers =
    "SECOND=1, MINUTE=2, HOUR=3, DAY=4, MONTH=5, YEAR=6 or WEEK=7";

// What a Struct value is, for messages: "a string", "a number", ...
const char* Describe(const Value& value) {
  switch (value.kind_case()) {
    case Value::kNullValue:
      return "null";
    case Value::kNumberValue:
      return "a number";
    case Value::kStringValue:
      return "a string";
    case Value::kBoolValue:
      return "a boolean";
    case Value::kStructValue:
      return "a map";
    case Value::kListValue:
      return "a list";
    default:
      return "nothing";
  }
}

template <typename T>
void Given(Field<T>& field, T value) {
  field.given = true;
  field.value = std::move(value);
}

// Reads the "sluice" metadata of one descriptor into its description.
class SluiceKeys {
 public:
  SluiceKeys(const std::string& source, std::string path)
      : source_(source), path_(std::move(path)) {}

  void String(const Value& value, absl::string_view key, Field<std::string>& out) const {
    if (value.kind_case() != Value::kStringValue) {
      Fail(key, "a string", value, out);
      return;
    }
    Given(out, value.string_value());
  }

  void Bool(const Value& value, absl::string_view key, Field<bool>& out) const {
    if (value.kind_case() != Value::kBoolValue) {
      Fail(key, "a boolean", value, out);
      return;
    }
    Given(out, value.bool_value());
  }

  void Uint32(const Value& value, absl::string_view key, Field<uint32_t>& out) const {
    const double number = value.number_value();
    if (value.kind_case() != Value::kNumberValue || !(number >= 0) || number > UINT32_MAX ||
        std::floor(number) != number) {
      Fail(key, "a whole number from 0 to 4294967295", value, out);
      return;
    }
    Given(out, static_cast<uint32_t>(number));
  }

  void Number(const Value& value, absl::string_view key, Field<double>& out) const {
    if (value.kind_case() != Value::kNumberValue) {
      Fail(key, "a number", value, out);
      return;
    }
    Given(out, value.number_value());
  }

  // The key is the management server's text: an unknown one is escaped and cut.
  std::string Path(absl::string_view key) const {
    return FieldPath(FieldPath(FieldPath(path_, "metadata"), kSluiceMetadataKey), LogText(key));
  }

 private:
  template <typename T>
  void Fail(absl::string_view key, absl::string_view expected, const Value& got,
            Field<T>& out) const {
    out.given = true;
    out.read_error = ConfigError(source_, 0, Path(key),
                                 absl::StrCat("expected ", expected, ", got ", Describe(got)));
  }

  const std::string& source_;
  const std::string path_;
};

// The keys of metadata.sluice this Sluice reads, for the messages about the others.
constexpr absl::string_view kKnownSluiceKeys =
    "algorithm, burst, unit_multiplier, hash_tag, local_share, charge, value_to_metric, "
    "share_threshold and failure_mode";

// What the snapshot's metadata.sluice maps held that this Sluice does not know: one warning
// per key, however many descriptors give it (a management server may set one on thousands).
class UnknownSluiceKeys {
 public:
  // Distinct keys listed; past them, uses are counted only.
  static constexpr size_t kMaxKeys = 16;

  void Note(absl::string_view key, absl::string_view source, std::string path) {
    auto it = keys_.find(key);
    if (it == keys_.end()) {
      if (keys_.size() >= kMaxKeys) {
        ++unlisted_;
        return;
      }
      it = keys_.emplace(std::string(key), Use{std::string(source), std::move(path), 0}).first;
    }
    ++it->second.descriptors;
  }

  // The warnings, in key order.
  std::vector<std::string> Warnings() const {
    std::vector<std::string> out;
    for (const auto& [key, use] : keys_) {
      out.push_back(ConfigMessage(
          use.source, 0, use.path,
          absl::StrCat("unknown key, ignored (this Sluice knows ", kKnownSluiceKeys,
                       "; envoyproxy/ratelimit passes metadata through), on ", use.descriptors,
                       use.descriptors == 1 ? " descriptor" : " descriptors",
                       " of this snapshot (--strict_config refuses it)")));
    }
    if (unlisted_ > 0) {
      out.push_back(absl::StrCat("xds: ", unlisted_,
                                 " more uses of unknown metadata.sluice keys, ignored"));
    }
    return out;
  }

 private:
  struct Use {
    std::string source;
    std::string path;  // of its first use
    int64_t descriptors = 0;
  };
  std::map<std::string, Use, std::less<>> keys_;
  int64_t unlisted_ = 0;
};

class DomainReader {
 public:
  // `unknown`: where unknown metadata.sluice keys are noted and then ignored; null: they stop
  // the reading (strict).
  DomainReader(DomainDescription& domain, UnknownSluiceKeys* unknown)
      : domain_(domain), unknown_(unknown) {}

  void ReadList(const google::protobuf::RepeatedPtrField<rls::RateLimitDescriptor>& list,
                const std::string& path, int depth,
                Field<std::vector<DescriptorDescription>>& out) {
    if (list.empty()) {
      return;
    }
    out.given = true;
    if (depth > kMaxDescriptorDepth) {
      out.read_error = ConfigError(
          domain_.source, 0, path,
          absl::StrCat("descriptors nested more than ", kMaxDescriptorDepth, " levels deep"));
      return;
    }
    out.value.reserve(list.size());
    for (int i = 0; i < list.size(); ++i) {
      DescriptorDescription& item = out.value.emplace_back();
      if (!ReadDescriptor(list[i], ItemPath(path, i), depth, item)) {
        return;
      }
    }
  }

 private:
  // False when reading stops here (a problem the validator is to report).
  bool ReadDescriptor(const rls::RateLimitDescriptor& in, const std::string& path, int depth,
                      DescriptorDescription& out) {
    Given(out.key, in.key());
    if (!in.value().empty()) {
      Given(out.value, in.value());
    }
    if (in.shadow_mode()) {
      Given(out.shadow_mode, true);
    }
    if (in.detailed_metric()) {
      Given(out.detailed_metric, true);
    }
    if (in.quota_mode()) {
      Given(out.quota_mode, true);
    }
    if (in.has_rate_limit()) {
      ReadRule(in.rate_limit(), FieldPath(path, "rate_limit"), out.rate_limit.emplace());
    }
    if (in.has_metadata() && !ReadMetadata(in.metadata(), path, depth, out)) {
      return false;
    }
    ReadList(in.descriptors(), FieldPath(path, "descriptors"), depth + 1, out.descriptors);
    return out.descriptors.read_error.ok();
  }

  void ReadRule(const rls::RateLimitPolicy& in, const std::string& path,
                RuleDescription& out) const {
    if (!rls::RateLimitUnit_IsValid(in.unit())) {
      // A number this proto's enum does not name (a newer management server's, or garbage):
      // it has no name to quote, so the message gives the number.
      out.unit.given = true;
      out.unit.read_error = ConfigError(
          domain_.source, 0, FieldPath(path, "unit"),
          absl::StrCat("unknown unit ", in.unit(), " (expected ", kUnitNumbers, ")"));
    } else if (in.unit() != rls::UNKNOWN) {
      Given(out.unit, rls::RateLimitUnit_Name(in.unit()));
    }
    Given(out.requests_per_unit, in.requests_per_unit());
    if (in.unlimited()) {
      Given(out.unlimited, true);
    }
    if (!in.name().empty()) {
      Given(out.name, in.name());
    }
    if (!in.replaces().empty()) {
      out.replaces.given = true;
      for (const rls::RateLimitReplace& replace : in.replaces()) {
        Given(out.replaces.value.emplace_back().name, replace.name());
      }
    }
  }

  // The metadata without the "sluice" entry, and that entry's keys. False when an unknown key
  // stops the reading of this descriptor.
  bool ReadMetadata(const Struct& metadata, const std::string& path, int depth,
                    DescriptorDescription& out) {
    auto rest = std::make_shared<Struct>(metadata);
    auto sluice = rest->mutable_fields()->find(std::string(kSluiceMetadataKey));
    if (sluice == rest->mutable_fields()->end()) {
      Given<std::shared_ptr<const Struct>>(out.metadata, std::move(rest));
      return true;
    }
    const Value own = std::move(sluice->second);
    rest->mutable_fields()->erase(sluice);
    if (!rest->fields().empty()) {
      Given<std::shared_ptr<const Struct>>(out.metadata, std::move(rest));
    }
    SluiceKeys keys(domain_.source, path);
    if (own.kind_case() != Value::kStructValue) {
      out.read_error = ConfigError(
          domain_.source, 0, FieldPath(FieldPath(path, "metadata"), kSluiceMetadataKey),
          absl::StrCat("expected a map of Sluice's rule keys, got ", Describe(own)));
      return false;
    }
    RuleDescription* rule = out.rate_limit.has_value() ? &*out.rate_limit : nullptr;
    // In key order: a protobuf map's own order is unspecified, and the first problem reported
    // must not change from one reading to the next.
    std::vector<std::pair<std::string, const Value*>> entries;
    for (const auto& [key, value] : own.struct_value().fields()) {
      entries.emplace_back(key, &value);
    }
    std::sort(entries.begin(), entries.end());
    for (const auto& [key, value_ptr] : entries) {
      const Value& value = *value_ptr;
      if (key == "value_to_metric") {
        keys.Bool(value, key, out.value_to_metric);
      } else if (key == "share_threshold") {
        keys.Bool(value, key, out.share_threshold);
      } else if (key == "failure_mode") {
        if (depth != 1) {
          out.read_error = ConfigError(domain_.source, 0, keys.Path(key),
                                       "failure_mode is the domain's: give it on a top-level "
                                       "descriptor");
          return false;
        }
        ReadFailureMode(value, keys, key);
      } else if (IsRuleKey(key)) {
        if (rule == nullptr) {
          out.read_error = ConfigError(domain_.source, 0, keys.Path(key),
                                       "a rule key on a descriptor without rate_limit");
          return false;
        }
        ReadRuleKey(keys, key, value, *rule);
      } else if (unknown_ != nullptr) {
        unknown_->Note(LogText(key), domain_.source, keys.Path(key));
      } else {
        out.read_error = ConfigError(
            domain_.source, 0, keys.Path(key),
            absl::StrCat("unknown key (expected ", kKnownSluiceKeys,
                         "; --strict_config refuses what envoyproxy/ratelimit would pass "
                         "through)"));
        return false;
      }
    }
    return true;
  }

  static bool IsRuleKey(absl::string_view key) {
    return key == "algorithm" || key == "burst" || key == "unit_multiplier" ||
           key == "hash_tag" || key == "local_share" || key == "charge";
  }

  static void ReadRuleKey(const SluiceKeys& keys, absl::string_view key, const Value& value,
                          RuleDescription& rule) {
    if (key == "algorithm") {
      keys.String(value, key, rule.algorithm);
    } else if (key == "burst") {
      keys.Uint32(value, key, rule.burst);
    } else if (key == "unit_multiplier") {
      keys.Uint32(value, key, rule.unit_multiplier);
    } else if (key == "hash_tag") {
      keys.String(value, key, rule.hash_tag);
    } else if (key == "charge") {
      keys.String(value, key, rule.charge);
    } else {
      keys.Number(value, key, rule.local_share);
    }
  }

  // The first top-level descriptor to give failure_mode sets the domain's; a later one that
  // differs is an error at its own path.
  void ReadFailureMode(const Value& value, const SluiceKeys& keys, absl::string_view key) {
    Field<std::string> mode;
    keys.String(value, key, mode);
    if (!domain_.failure_mode.read_error.ok()) {
      return;  // the first problem stands
    }
    if (!domain_.failure_mode.given || !mode.read_error.ok()) {
      domain_.failure_mode = std::move(mode);
      return;
    }
    if (mode.value != domain_.failure_mode.value) {
      domain_.failure_mode.read_error = ConfigError(
          domain_.source, 0, keys.Path(key),
          absl::StrCat(Quoted(mode.value), " differs from the domain's failure_mode ",
                       Quoted(domain_.failure_mode.value), " given on an earlier descriptor"));
    }
  }

  DomainDescription& domain_;
  UnknownSluiceKeys* const unknown_;
};

DomainDescription ReadDomain(const rls::RateLimitConfig& resource, UnknownSluiceKeys* unknown) {
  DomainDescription domain;
  // The name is the management server's text, first in every message about the domain: escaped
  // and cut.
  domain.source =
      absl::StrCat("xds:", LogText(resource.name().empty() ? resource.domain() : resource.name()));
  Given(domain.domain, resource.domain());
  DomainReader(domain, unknown)
      .ReadList(resource.descriptors(), "descriptors", 1, domain.descriptors);
  return domain;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Config>> ConfigFromXdsResources(
    const google::protobuf::RepeatedPtrField<google::protobuf::Any>& resources,
    const ValidateOptions& options) {
  ConfigValidator validator(options);
  UnknownSluiceKeys unknown;  // over the whole snapshot: one warning per key
  rls::RateLimitConfig resource;
  for (int i = 0; i < resources.size(); ++i) {
    const google::protobuf::Any& any = resources[i];
    if (any.type_url() != kRateLimitConfigTypeUrl || !any.UnpackTo(&resource)) {
      return absl::InvalidArgumentError(
          absl::StrCat("resources[", i, "]: ", LogText(any.type_url()),
                       any.type_url() != kRateLimitConfigTypeUrl
                           ? absl::StrCat(": not a ", kRateLimitConfigTypeUrl)
                           : ": does not parse as a RateLimitConfig"));
    }
    absl::Status added =
        validator.AddDomain(ReadDomain(resource, options.strict ? nullptr : &unknown));
    if (!added.ok()) {
      return added;
    }
  }
  std::unique_ptr<Config> config = validator.Finish();
  std::vector<std::string> ignored = unknown.Warnings();
  std::vector<std::string>& warnings = config->mutable_warnings();
  warnings.insert(warnings.begin(), std::make_move_iterator(ignored.begin()),
                  std::make_move_iterator(ignored.end()));
  return config;
}

}  // namespace sluice
