// The flags Settings is read from: each flag's name, its type as server/main.cc defines it, and
// the field of Settings it sets. SettingsFromFlags turns the flags' texts (each with where it
// came from) into Settings, validated whole: every value that cannot be read and every setting
// that ValidateSettings refuses, each message naming its flag and, when an envoyproxy/ratelimit
// variable set that flag, the variable too.
//
// Pure functions over a constant table; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/strings/string_view.h"
#include "server/settings/settings.h"

namespace sluice {

// Where a flag's value in force came from, lowest precedence first.
enum class FlagSource {
  kDefault,      // nothing set it
  kUpstream,     // an envoyproxy/ratelimit variable (server/settings/upstream_env.h)
  kEnvironment,  // its SLUICE_<FLAG> variable
  kCommandLine,  // the command line
};

// One flag's value in force, as text (the way a command line writes it).
struct FlagText {
  std::string text;
  FlagSource source = FlagSource::kCommandLine;
  // kUpstream: the variables that set it ("GRPC_HOST, GRPC_PORT"); kEnvironment: the
  // variable's name ("SLUICE_GRPC_ADDRESS"); otherwise empty.
  std::string variables;
};

// Flag name (without dashes) -> its value in force. A flag that is absent keeps the default
// written in Settings (the flags of server/main.cc take their defaults from there).
using FlagTexts = std::map<std::string, FlagText>;

// Settings, or everything that is wrong with them.
struct SettingsOrErrors {
  Settings settings;                // meaningful only when `errors` is empty
  std::vector<std::string> errors;  // one message each, in a fixed order
};

// Reads `flags` into Settings and validates the result whole. A text that does not parse as
// its flag's type, or a value the setting does not take (--backend=mongo), is an error naming
// the flag; so is each error of ValidateSettings, except one about a flag already reported,
// and --redis_addresses (or --redis_per_second_addresses) given beside the same Redis's
// sentinels, which Settings alone cannot show (the address has a default, which Sentinel leaves
// unused). An unknown flag name is an error too. Each message about a flag an envoyproxy/ratelimit
// variable set ends with "(--<flag> set by <variables>)".
SettingsOrErrors SettingsFromFlags(const FlagTexts& flags);

// The name of every flag Settings reads, in a fixed order.
std::vector<std::string> SettingFlagNames();

// Whether Settings reads `flag` (the name without dashes).
bool IsSettingFlag(absl::string_view flag);

// Parses `text` as `flag`'s type; true with `*normalized` the text the flag's value prints as
// ("0100" -> "100", "yes" -> "true"), false with `*error` in abseil's words ("Illegal value
// 'lots' specified for flag 'max_entries'"). REQUIRES: IsSettingFlag(flag).
bool NormalizeFlagText(absl::string_view flag, absl::string_view text, std::string* normalized,
                       std::string* error);

// Whether `defined`, the flag of that name a program defines, has the type Settings reads it
// as. REQUIRES: IsSettingFlag(defined.Name()).
bool HasSettingType(const absl::CommandLineFlag& defined);

}  // namespace sluice
