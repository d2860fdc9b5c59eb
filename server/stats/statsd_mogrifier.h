// DogStatsD mogrifiers as envoyproxy/ratelimit applies them (src/godogstats/mogrifier_map.go):
// rules that turn a statsd name into another name plus tags, e.g.
//   pattern ^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$
//   name    ratelimit.service.rate_limit.$3        tags domain:$1,descriptor:$2
// turns ratelimit.service.rate_limit.gw.user.total_hits into ratelimit.service.rate_limit.
// total_hits with the tags domain:gw and descriptor:user.
//
// Upstream's rules, each reproduced here:
//   - The rules are tried in the order given (USE_DOG_STATSD_MOGRIFIERS); the first whose
//     pattern matches anywhere in the name (Go's FindStringSubmatch: unanchored, leftmost-first;
//     RE2 is Go's syntax) makes the name and the tags; later rules are not tried. No rule
//     matches: the name unchanged, no tags.
//   - In the name and in each tag's value, `$` followed by digits (all of them: `$12` is group
//     12) is that group of the match ($0 the whole match, a group that took no part ""); a
//     group the pattern does not have leaves the text as written ("$5"), as does a number too
//     large to read.
//   - Tags come out as "key:value". Upstream keeps them in a Go map, so its order changes from
//     run to run; here they keep the order they were given in.
//
// Immutable once built; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace re2 {
class RE2;
}

namespace sluice {

// One rule as configured (DOG_STATSD_MOGRIFIER_<ID>_PATTERN, _NAME, _TAGS).
struct StatsdMogrifierRule {
  std::string id;       // names the rule in errors; may be empty
  std::string pattern;  // RE2 (Go's regexp syntax)
  std::string name;     // template of the new name
  // Tag keys and value templates, in the order they are sent.
  std::vector<std::pair<std::string, std::string>> tags;
};

class StatsdMogrifiers {
 public:
  // The rules, compiled. kInvalidArgument naming the rule: an empty pattern or name, a pattern
  // that does not compile, a tag with an empty key or value (upstream's newMogrifierMapFromEnv
  // refuses the same). Settings have refused these already (CheckStatsdMogrifier in
  // server/settings/statsd_mogrifiers_flag.h); the stats library does not depend on settings,
  // so a caller that builds rules itself is checked here.
  static absl::StatusOr<StatsdMogrifiers> Create(const std::vector<StatsdMogrifierRule>& rules);

  StatsdMogrifiers();
  ~StatsdMogrifiers();
  StatsdMogrifiers(StatsdMogrifiers&&) noexcept;
  StatsdMogrifiers& operator=(StatsdMogrifiers&&) noexcept;

  struct Result {
    std::string name;
    std::vector<std::string> tags;  // "key:value"
  };
  // `name` as the first matching rule rewrites it, or unchanged with no tags.
  Result Mogrify(absl::string_view name) const;

  bool empty() const { return rules_.empty(); }

 private:
  struct Compiled;
  std::vector<std::unique_ptr<const Compiled>> rules_;
};

// `pattern` with each `$<digits>` replaced by that entry of `groups` when there is one (see
// above); makePatternHandler's replacement, for tests.
std::string ExpandMogrifierTemplate(absl::string_view pattern,
                                    const std::vector<absl::string_view>& groups);

}  // namespace sluice
