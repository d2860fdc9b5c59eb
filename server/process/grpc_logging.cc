#include "server/process/grpc_logging.h"

#include <grpc/support/log.h>

#include <string_view>

#include "server/common/log_text.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

constexpr size_t kMaxBytes = 512;

std::string_view BaseName(const char* file) {
  std::string_view path = file != nullptr ? file : "";
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

void LogGrpcLine(gpr_log_func_args* args) {
  const std::string text = LogText(args->message != nullptr ? args->message : "", kMaxBytes);
  const std::string_view where = BaseName(args->file);
  // One limiter per severity (per call site of the macro): errors are not hidden by a flood of
  // debug lines, nor the other way round.
  switch (args->severity) {
    case GPR_LOG_SEVERITY_ERROR:
      SLUICE_LOG_EVERY_SECONDS(ERROR, 1) << "grpc " << where << ":" << args->line << ": " << text;
      break;
    case GPR_LOG_SEVERITY_INFO:
      SLUICE_LOG_EVERY_SECONDS(INFO, 1) << "grpc " << where << ":" << args->line << ": " << text;
      break;
    default:
      SLUICE_LOG_EVERY_SECONDS(DEBUG, 1) << "grpc " << where << ":" << args->line << ": " << text;
      break;
  }
}

}  // namespace

void RouteGrpcLogs() {
  // GRPC_VERBOSITY (default: errors only) as gRPC reads it at its own initialization, which may
  // come later than this.
  gpr_log_verbosity_init();
  gpr_set_log_function(&LogGrpcLine);
}

}  // namespace sluice
