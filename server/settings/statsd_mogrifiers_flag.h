// The text of --statsd_mogrifiers, both ways: a YAML (or JSON) list of DogStatsD mogrifiers,
//   [{id: HITS, pattern: '^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$',
//     name: 'ratelimit.service.rate_limit.$3', tags: 'domain:$1,descriptor:$2'}]
// and the map text upstream's settings read a mogrifier's TAGS and EXTRA_TAGS in
// (kelseyhightower/envconfig v1.4.0's map: items split at ',', each split at ':' into exactly
// two parts, nothing trimmed). upstream_env.cc writes the flag from upstream's
// DOG_STATSD_MOGRIFIER_* variables with StatsdMogrifiersFlagText. Both check each mogrifier with
// CheckStatsdMogrifier, so a bad one is refused with the other settings, before anything starts.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/settings/settings.h"

namespace sluice {

// What is wrong with one mogrifier, as upstream's newMogrifierMapFromEnv refuses it: no
// pattern, a pattern that does not compile (RE2 with the options server/stats compiles it with,
// so what passes here compiles there), no name, a tag with an empty key or value. The flag and
// upstream's variables word each fault their own way, so the caller writes the message.
struct StatsdMogrifierFault {
  enum Kind { kNoPattern, kPatternDoesNotCompile, kNoName, kTagWithoutKey, kTagWithoutValue };
  Kind kind;
  // RE2's error (kPatternDoesNotCompile), the tag's key (kTagWithoutValue); otherwise empty.
  std::string detail;
};

// The first fault of `mogrifier`, in upstream's order (above); nullopt when it has none.
std::optional<StatsdMogrifierFault> CheckStatsdMogrifier(const StatsdMogrifierSettings& mogrifier);

// The mogrifiers `text` lists, in order; empty text: none. kInvalidArgument saying what is
// wrong: not YAML, not a list of maps, an unknown key, tags that do not read
// (ParseEnvconfigMap), or a mogrifier CheckStatsdMogrifier refuses.
absl::StatusOr<std::vector<StatsdMogrifierSettings>> ParseStatsdMogrifiers(absl::string_view text);

// The flag's text for `mogrifiers` (JSON, which ParseStatsdMogrifiers reads back the same).
std::string StatsdMogrifiersFlagText(const std::vector<StatsdMogrifierSettings>& mogrifiers);

// envconfig's reading of a map[string]string: blank text is empty; otherwise every item between
// commas must have exactly one ':' (kInvalidArgument "invalid map item: \"a:b:c\"", upstream's
// words). A key given twice keeps its first place and its last value (a Go map).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseEnvconfigMap(
    absl::string_view text);

// The pairs in the text ParseEnvconfigMap reads ("k:v,k2:v2").
std::string EnvconfigMapText(const std::vector<std::pair<std::string, std::string>>& pairs);

}  // namespace sluice
