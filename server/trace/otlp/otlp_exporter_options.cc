#include "server/trace/otlp/otlp_exporter_options.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/flag_file.h"
#include "server/common/status_macros.h"

namespace sluice {
namespace {

// Set by the exporters themselves (HTTP framing, gRPC's own metadata).
constexpr absl::string_view kReservedHeaders[] = {
    "host", "content-type", "content-length", "transfer-encoding", "connection", "te",
    "user-agent", "upgrade", "expect", "keep-alive",
};

// An HTTP token character (RFC 9110), less the upper case (gRPC metadata names are lower case;
// upper-case names are lower-cased before this check).
bool IsNameChar(char c) {
  return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'z') ||
         c == '-' || c == '_' || c == '.';
}

}  // namespace

absl::Status ValidateOtlpHeaders(const std::vector<std::pair<std::string, std::string>>& headers) {
  for (const auto& [name, value] : headers) {
    const std::string lower = absl::AsciiStrToLower(name);
    if (lower.empty() || !std::all_of(lower.begin(), lower.end(), IsNameChar)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header \"", absl::CHexEscape(name),
          "\": a name is letters, digits, '-', '_' and '.'"));
    }
    if (absl::StartsWith(lower, "grpc-") ||
        std::find(std::begin(kReservedHeaders), std::end(kReservedHeaders), lower) !=
            std::end(kReservedHeaders)) {
      return absl::InvalidArgumentError(
          absl::StrCat("header \"", name, "\": set by the exporter itself"));
    }
    if (!std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7e; })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header \"", name, "\": a value is printable ASCII (no line breaks or control bytes)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadOtlpCaFile(const std::string& ca_file) {
  std::string pem;
  ASSIGN_OR_RETURN(pem, ReadFlagFile("tracing_ca", ca_file));
  if (!absl::StrContains(pem, "-----BEGIN CERTIFICATE-----")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tracing_ca=", ca_file, ": holds no PEM certificate"));
  }
  return pem;
}

}  // namespace sluice
