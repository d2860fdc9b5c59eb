#include "server/process/process.h"

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/common/logging.h"
#include "server/process/grpc_logging.h"
#include "server/config/config_loader.h"
#include "server/process/assembly.h"
#include "server/process/lifecycle.h"
#include "server/process/part_options.h"

namespace sluice {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "sluice: %s\n", std::string(status.message()).c_str());
  return 1;
}

void StartLog(const LoadedSettings& loaded) {
  SetMinLogLevel(loaded.settings.log.level);
  SetLogFormat(loaded.settings.log.format);
  RouteGrpcLogs();
  for (const std::string& note : loaded.upstream_notes) {
    SLUICE_LOG(INFO) << "envoyproxy/ratelimit setting: " << note;
  }
  for (const std::string& warning : loaded.upstream_warnings) {
    SLUICE_LOG(WARNING) << "envoyproxy/ratelimit setting not honoured: " << warning;
  }
  if (!loaded.default_config_note.empty()) {
    SLUICE_LOG(INFO) << loaded.default_config_note;
  }
}

// The config to start with. Null with --config_source=xds, or when the files cannot be loaded
// and --force_start_without_initial_config allows serving without one (logged); an error when
// they cannot be loaded otherwise.
absl::StatusOr<std::shared_ptr<const Config>> LoadInitialConfig(const Settings& settings) {
  if (settings.config.source == ConfigSourceKind::kXds) {
    return nullptr;  // the xDS client's first snapshot (Lifecycle::AwaitFirstConfig)
  }
  auto loaded = LoadConfigPath(settings.config.path,
                               ConfigLoadOptionsFrom(settings.config, settings.backend));
  if (loaded.ok()) {
    return std::shared_ptr<const Config>(*std::move(loaded));
  }
  if (settings.check_config || !settings.config.force_start_without_initial_config) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("invalid config: ", loaded.status().message()));
  }
  SLUICE_LOG(ERROR) << "invalid config, serving without one until it is fixed "
                       "(--force_start_without_initial_config): "
                    << loaded.status().message();
  return nullptr;
}

// --check_config's report on stdout: counts, warnings, then the rules.
void PrintConfigCheck(const Config& config) {
  std::printf("config OK: %zu domains, %zu rules, %zu warnings\n", config.domains().size(),
              config.RuleCount(), config.warnings().size());
  for (const std::string& warning : config.warnings()) {
    std::printf("warning: %s\n", warning.c_str());
  }
  std::printf("%s", config.Dump().c_str());
}

}  // namespace

int RunProcess(const LoadedSettings& loaded) {
  const Settings& settings = loaded.settings;
  StartLog(loaded);
  absl::StatusOr<std::shared_ptr<const Config>> config = LoadInitialConfig(settings);
  if (!config.ok()) {
    return Fail(config.status());
  }
  if (settings.check_config) {
    PrintConfigCheck(**config);
    return 0;
  }
  if (*config != nullptr) {
    for (const std::string& warning : (*config)->warnings()) {
      SLUICE_LOG(WARNING) << "config: " << warning;
    }
  }
  TakeProcessSignals();
  absl::StatusOr<std::unique_ptr<Assembly>> parts = Assembly::Create(settings, *config);
  if (!parts.ok()) {
    return Fail(parts.status());
  }
  if (absl::Status run = Lifecycle(**parts, settings).Run(); !run.ok()) {
    return Fail(run);
  }
  return 0;
}

}  // namespace sluice
