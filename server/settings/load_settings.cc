#include "server/settings/load_settings.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <utility>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/settings/flag_layers.h"
#include "server/settings/setting_flags.h"
#include "server/settings/upstream_env.h"

namespace sluice {
namespace {

std::optional<std::string> ProcessEnvironment(absl::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) {
    return std::nullopt;
  }
  return std::string(value);
}

// Whether `flag` is defined in `file` (a path as __FILE__ writes it; abseil reports flags'
// files without leading "/" and "./").
bool DefinedIn(const absl::CommandLineFlag& flag, absl::string_view file) {
  while (absl::ConsumePrefix(&file, "/") || absl::ConsumePrefix(&file, "./")) {
  }
  return flag.Filename() == file;
}

// Errors for a flag `flags_file` defines that Settings does not read or reads as another
// type, and for a flag Settings reads that `flags_file` does not define.
void CheckDefinitions(absl::string_view flags_file, std::vector<std::string>& errors) {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!DefinedIn(*flag, flags_file)) {
      continue;
    }
    if (!IsSettingFlag(name)) {
      errors.push_back(absl::StrCat("--", name, ": no setting reads this flag"));
    } else if (!HasSettingType(*flag)) {
      errors.push_back(absl::StrCat("--", name, ": its type is not its setting's"));
    }
  }
  for (const std::string& name : SettingFlagNames()) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || !DefinedIn(*flag, flags_file)) {
      errors.push_back(absl::StrCat("--", name, ": no such flag in ", flags_file));
    }
  }
}

// Sets the flags to what the environment says, so that the command line (flag files
// included) is parsed on top of it.
void SetFlags(const FlagTexts& texts, std::vector<std::string>& errors) {
  for (const auto& [name, value] : texts) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag != nullptr && !flag->ParseFrom(value.text, &error)) {
      errors.push_back(absl::StrCat(value.variables, ": ", error));
    }
  }
}

// The flags the command line set, with their text: those it names, and those whose value is
// not what the environment (or the default) left them with (a --flagfile's).
std::map<std::string, std::string> CommandLineTexts(const std::vector<std::string>& args,
                                                    const FlagTexts& from_environment) {
  std::map<std::string, std::string> texts;
  for (const std::string& name : SettingFlagNames()) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      continue;
    }
    auto it = from_environment.find(name);
    const std::string before =
        it != from_environment.end() ? it->second.text : flag->DefaultValue();
    std::string now = flag->CurrentValue();
    if (CommandLineNamesFlag(args, name) || now != before) {
      texts[name] = std::move(now);
    }
  }
  return texts;
}

}  // namespace

LoadedSettings LoadSettings(int argc, char** argv, absl::string_view flags_file) {
  LoadedSettings out;
  CheckDefinitions(flags_file, out.errors);
  LayeredFlags layered = LayerEnvironment(&ProcessEnvironment);
  SetFlags(layered.flags, out.errors);
  absl::ParseCommandLine(argc, argv);
  LayerCommandLine(CommandLineTexts(std::vector<std::string>(argv + 1, argv + argc), layered.flags),
                   &ProcessEnvironment, layered);
  out.upstream_notes = std::move(layered.notes);
  out.upstream_warnings = std::move(layered.warnings);
  out.default_config_note = std::move(layered.default_config_note);
  out.errors.insert(out.errors.end(), layered.errors.begin(), layered.errors.end());
  SettingsOrErrors read = SettingsFromFlags(layered.flags);
  out.settings = std::move(read.settings);
  out.errors.insert(out.errors.end(), read.errors.begin(), read.errors.end());
  return out;
}

}  // namespace sluice
