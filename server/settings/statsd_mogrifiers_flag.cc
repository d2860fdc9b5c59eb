#include "server/settings/statsd_mogrifiers_flag.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "re2/re2.h"
#include "server/common/json_string.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

absl::Status Invalid(size_t index, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("mogrifier ", index + 1, ": ", what));
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseEnvconfigMap(
    absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return pairs;
  }
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(item, ':');
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("invalid map item: \"", item, "\""));
    }
    bool seen = false;
    for (auto& [key, value] : pairs) {
      if (key == kv[0]) {
        value = std::string(kv[1]);
        seen = true;
      }
    }
    if (!seen) {
      pairs.emplace_back(std::string(kv[0]), std::string(kv[1]));
    }
  }
  return pairs;
}

std::string EnvconfigMapText(const std::vector<std::pair<std::string, std::string>>& pairs) {
  return absl::StrJoin(pairs, ",", absl::PairFormatter(":"));
}

std::optional<StatsdMogrifierFault> CheckStatsdMogrifier(const StatsdMogrifierSettings& mogrifier) {
  if (mogrifier.pattern.empty()) {
    return StatsdMogrifierFault{StatsdMogrifierFault::kNoPattern, ""};
  }
  // As StatsdMogrifiers::Create compiles it (server/stats/statsd_mogrifier.cc).
  re2::RE2::Options options;
  options.set_log_errors(false);
  const re2::RE2 pattern(mogrifier.pattern, options);
  if (!pattern.ok()) {
    return StatsdMogrifierFault{StatsdMogrifierFault::kPatternDoesNotCompile, pattern.error()};
  }
  if (mogrifier.name.empty()) {
    return StatsdMogrifierFault{StatsdMogrifierFault::kNoName, ""};
  }
  for (const auto& [key, value] : mogrifier.tags) {
    if (key.empty()) {
      return StatsdMogrifierFault{StatsdMogrifierFault::kTagWithoutKey, ""};
    }
    if (value.empty()) {
      return StatsdMogrifierFault{StatsdMogrifierFault::kTagWithoutValue, key};
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<StatsdMogrifierSettings>> ParseStatsdMogrifiers(absl::string_view text) {
  std::vector<StatsdMogrifierSettings> out;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return out;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not YAML or JSON: ", e.msg));
  }
  if (!root.IsSequence()) {
    return absl::InvalidArgumentError("not a list of mogrifiers ([{pattern: ..., name: ...}])");
  }
  for (size_t i = 0; i < root.size(); ++i) {
    const YAML::Node item = root[i];
    if (!item.IsMap()) {
      return Invalid(i, "not a map of pattern, name, tags and id");
    }
    StatsdMogrifierSettings mogrifier;
    std::string tags;
    for (const auto& field : item) {
      if (!field.first.IsScalar() || !(field.second.IsScalar() || field.second.IsNull())) {
        return Invalid(i, "every key and value is a string");
      }
      const std::string key = field.first.Scalar();
      const std::string value = field.second.IsNull() ? "" : field.second.Scalar();
      if (key == "id") {
        mogrifier.id = value;
      } else if (key == "pattern") {
        mogrifier.pattern = value;
      } else if (key == "name") {
        mogrifier.name = value;
      } else if (key == "tags") {
        tags = value;
      } else {
        return Invalid(i, absl::StrCat("unknown key '", key, "' (pattern, name, tags, id)"));
      }
    }
    const std::string which = mogrifier.id.empty() ? absl::StrCat(i + 1) : mogrifier.id;
    auto error = [&which](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("mogrifier ", which, ": ", what));
    };
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
        ParseEnvconfigMap(tags);
    if (!pairs.ok()) {
      return error(absl::StrCat("tags: ", pairs.status().message()));
    }
    mogrifier.tags = std::move(*pairs);
    if (std::optional<StatsdMogrifierFault> fault = CheckStatsdMogrifier(mogrifier)) {
      switch (fault->kind) {
        case StatsdMogrifierFault::kNoPattern:
          return error("no pattern");
        case StatsdMogrifierFault::kPatternDoesNotCompile:
          return error(absl::StrCat("pattern '", mogrifier.pattern, "' does not compile: ",
                                    fault->detail));
        case StatsdMogrifierFault::kNoName:
          return error("no name");
        case StatsdMogrifierFault::kTagWithoutKey:
          return error("tags: a tag with no key");
        case StatsdMogrifierFault::kTagWithoutValue:
          return error(absl::StrCat("tags: no value for tag ", fault->detail));
      }
    }
    out.push_back(std::move(mogrifier));
  }
  return out;
}

std::string StatsdMogrifiersFlagText(const std::vector<StatsdMogrifierSettings>& mogrifiers) {
  std::string out = "[";
  for (const StatsdMogrifierSettings& m : mogrifiers) {
    if (out.size() > 1) {
      out += ", ";
    }
    out += "{\"id\": ";
    AppendJsonString(m.id, &out);
    out += ", \"pattern\": ";
    AppendJsonString(m.pattern, &out);
    out += ", \"name\": ";
    AppendJsonString(m.name, &out);
    out += ", \"tags\": ";
    AppendJsonString(EnvconfigMapText(m.tags), &out);
    out += "}";
  }
  out += "]";
  return out;
}

}  // namespace sluice
