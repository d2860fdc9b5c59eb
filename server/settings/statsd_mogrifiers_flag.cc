#include "server/settings/statsd_mogrifiers_flag.h"

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

// `text` as a JSON string, quotes included.
std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", u);
      out.append(escaped);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

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
    if (mogrifier.pattern.empty()) {
      return error("no pattern");
    }
    if (mogrifier.name.empty()) {
      return error("no name");
    }
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
        ParseEnvconfigMap(tags);
    if (!pairs.ok()) {
      return error(absl::StrCat("tags: ", pairs.status().message()));
    }
    for (const auto& [key, value] : *pairs) {
      if (key.empty()) {
        return error("tags: a tag with no key");
      }
      if (value.empty()) {
        return error(absl::StrCat("tags: no value for tag ", key));
      }
    }
    mogrifier.tags = std::move(*pairs);
    out.push_back(std::move(mogrifier));
  }
  return out;
}

std::string StatsdMogrifiersFlagText(const std::vector<StatsdMogrifierSettings>& mogrifiers) {
  std::vector<std::string> items;
  for (const StatsdMogrifierSettings& m : mogrifiers) {
    items.push_back(absl::StrCat("{\"id\": ", JsonQuote(m.id), ", \"pattern\": ",
                                 JsonQuote(m.pattern), ", \"name\": ", JsonQuote(m.name),
                                 ", \"tags\": ", JsonQuote(EnvconfigMapText(m.tags)), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

}  // namespace sluice
