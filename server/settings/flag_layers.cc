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
}

LayeredFlags LayerFlags(const EnvLookup& env,
                        const std::map<std::string, std::string>& command_line) {
  LayeredFlags layered = LayerEnvironment(env);
  LayerCommandLine(command_line, env, layered);
  return layered;
}

}  // namespace sluice
