#include "server/stats/statsd_mogrifier.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "re2/re2.h"

namespace sluice {

struct StatsdMogrifiers::Compiled {
  std::unique_ptr<re2::RE2> pattern;
  StatsdMogrifierRule rule;
};

StatsdMogrifiers::StatsdMogrifiers() = default;
StatsdMogrifiers::~StatsdMogrifiers() = default;
StatsdMogrifiers::StatsdMogrifiers(StatsdMogrifiers&&) noexcept = default;
StatsdMogrifiers& StatsdMogrifiers::operator=(StatsdMogrifiers&&) noexcept = default;

absl::StatusOr<StatsdMogrifiers> StatsdMogrifiers::Create(
    const std::vector<StatsdMogrifierRule>& rules) {
  StatsdMogrifiers out;
  for (const StatsdMogrifierRule& rule : rules) {
    const std::string what = absl::StrCat("mogrifier ", rule.id.empty() ? "" : rule.id + " ");
    if (rule.pattern.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "has no pattern"));
    }
    if (rule.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "has no name"));
    }
    for (const auto& [key, value] : rule.tags) {
      if (key.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(what, "has a tag with no key"));
      }
      if (value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(what, "has no value for tag ", key));
      }
    }
    re2::RE2::Options options;
    options.set_log_errors(false);
    auto compiled = std::make_unique<Compiled>();
    compiled->pattern = std::make_unique<re2::RE2>(rule.pattern, options);
    if (!compiled->pattern->ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "pattern '", rule.pattern,
                                                     "' does not compile: ",
                                                     compiled->pattern->error()));
    }
    compiled->rule = rule;
    out.rules_.push_back(std::move(compiled));
  }
  return out;
}

StatsdMogrifiers::Result StatsdMogrifiers::Mogrify(absl::string_view name) const {
  std::vector<re2::StringPiece> groups;
  for (const auto& compiled : rules_) {
    const re2::RE2& re = *compiled->pattern;
    groups.assign(static_cast<size_t>(re.NumberOfCapturingGroups()) + 1, re2::StringPiece());
    if (!re.Match(re2::StringPiece(name.data(), name.size()), 0, name.size(),
                  re2::RE2::UNANCHORED, groups.data(), static_cast<int>(groups.size()))) {
      continue;
    }
    std::vector<absl::string_view> texts;
    texts.reserve(groups.size());
    for (const re2::StringPiece& group : groups) {
      texts.emplace_back(group.data() == nullptr ? absl::string_view()
                                                 : absl::string_view(group.data(), group.size()));
    }
    Result result;
    result.name = ExpandMogrifierTemplate(compiled->rule.name, texts);
    for (const auto& [key, value] : compiled->rule.tags) {
      result.tags.push_back(absl::StrCat(key, ":", ExpandMogrifierTemplate(value, texts)));
    }
    return result;
  }
  return Result{std::string(name), {}};
}

std::string ExpandMogrifierTemplate(absl::string_view pattern,
                                    const std::vector<absl::string_view>& groups) {
  std::string out;
  out.reserve(pattern.size());
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] != '$' || i + 1 >= pattern.size() ||
        !absl::ascii_isdigit(static_cast<unsigned char>(pattern[i + 1]))) {
      out.push_back(pattern[i]);
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < pattern.size() && absl::ascii_isdigit(static_cast<unsigned char>(pattern[end]))) {
      ++end;
    }
    const absl::string_view digits = pattern.substr(i + 1, end - i - 1);
    // Go's strconv.Atoi: a number past int64 is an error, and the text stays.
    uint64_t index = 0;
    bool readable = true;
    for (char c : digits) {
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      if (index > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        readable = false;
        break;
      }
      index = index * 10 + digit;
    }
    if (readable && index < groups.size()) {
      out.append(groups[index].data(), groups[index].size());
    } else {
      out.append(pattern.data() + i, end - i);
    }
    i = end;
  }
  return out;
}

}  // namespace sluice
