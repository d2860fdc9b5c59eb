#include "server/key/reset_log_key.h"

#include "absl/strings/str_cat.h"

namespace sluice {

std::string ResetLogKey(absl::string_view prefix) {
  return absl::StrCat(prefix, "{sluice_reset_log}");
}

}  // namespace sluice
