#include "server/settings/flag_layers.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {
namespace {

std::string OwnVariable(absl::string_view flag) {
  return absl::StrCat("SLUICE_", absl::AsciiStrToUpper(flag));
}

void ApplyUpstream(const EnvLookup& env, LayeredFlags& out) {
  UpstreamTranslation translation = TranslateUpstreamEnvironment(env);
  out.upstream_environment = translation.upstream_environment;
  if (!translation.errors.empty()) {
    out.errors.push_back(absl::StrCat("envoyproxy/ratelimit settings Sluice cannot honour:\n  ",
                                      absl::StrJoin(translation.errors, "\n  ")));
  }
  out.warnings = std::move(translation.warnings);
  for (FlagAssignment& assignment : translation.flags) {
    if (!IsSettingFlag(assignment.flag)) {
      out.errors.push_back(absl::StrCat(assignment.source, ": no flag --", assignment.flag));
      continue;
    }
    std::string value;
    std::string error;
    if (!NormalizeFlagText(assignment.flag, assignment.value, &value, &error)) {
      out.errors.push_back(absl::StrCat(assignment.source, ": ", error));
      continue;
    }
    out.flags[assignment.flag] = FlagText{value, FlagSource::kUpstream, assignment.source};
    out.upstream.emplace_back(std::move(assignment), std::move(value));
  }
}

void ApplyOwnVariables(const EnvLookup& env, LayeredFlags& out) {
  for (const std::string& flag : SettingFlagNames()) {
    const std::string variable = OwnVariable(flag);
    std::optional<std::string> text = env(variable);
    if (!text.has_value()) {
      continue;
    }
    std::string value;
    std::string error;
    if (!NormalizeFlagText(flag, *text, &value, &error)) {
      out.errors.push_back(
          absl::StrCat("environment variable ", variable, "='", *text, "': ", error));
      continue;
    }
    out.flags[flag] = FlagText{std::move(value), FlagSource::kEnvironment, variable};
  }
}

// A flag's text in force, or "" when no layer set it.
absl::string_view TextOf(const FlagTexts& flags, const std::string& flag) {
  auto it = flags.find(flag);
  return it != flags.end() ? absl::string_view(it->second.text) : absl::string_view();
}

// --default_config becomes --config when nothing names the rules and the environment is not
// upstream's (flag_layers.h, "The default config").
void ApplyDefaultConfig(LayeredFlags& layered) {
  auto default_config = layered.flags.find("default_config");
  if (default_config == layered.flags.end() || default_config->second.text.empty() ||
      layered.upstream_environment || !TextOf(layered.flags, "config").empty() ||
      TextOf(layered.flags, "config_source") == ConfigSourceKindName(ConfigSourceKind::kXds)) {
    return;
  }
  const FlagText from = default_config->second;
  const std::string set_by =
      from.source == FlagSource::kCommandLine ? "the command line" : from.variables;
  layered.default_config_note =
      absl::StrCat("--config=", from.text, " from --default_config (", set_by,
                   "): no --config, no --config_source=xds and none of envoyproxy/ratelimit's "
                   "variables");
  layered.flags["config"] = from;
}

}  // namespace

LayeredFlags LayerEnvironment(const EnvLookup& env) {
  LayeredFlags out;
  ApplyUpstream(env, out);
  ApplyOwnVariables(env, out);
  return out;
}

void LayerCommandLine(const std::map<std::string, std::string>& command_line, const EnvLookup& env,
                      LayeredFlags& layered) {
  for (const auto& [flag, text] : command_line) {
    layered.flags[flag] = FlagText{text, FlagSource::kCommandLine, ""};
  }
  for (const auto& [assignment, applied] : layered.upstream) {
    std::string overridden_by;
    if (command_line.count(assignment.flag) > 0) {
      overridden_by = "the command line";
    } else if (env(OwnVariable(assignment.flag)).has_value()) {
      overridden_by = OwnVariable(assignment.flag);
    }
    layered.notes.push_back(UpstreamAssignmentNote(
        assignment, applied, layered.flags[assignment.flag].text, overridden_by));
  }
  ApplyDefaultConfig(layered);
}

LayeredFlags LayerFlags(const EnvLookup& env,
                        const std::map<std::string, std::string>& command_line) {
  LayeredFlags layered = LayerEnvironment(env);
  LayerCommandLine(command_line, env, layered);
  return layered;
}

}  // namespace sluice
