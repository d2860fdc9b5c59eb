#include "server/service/request_validation.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/config/config.h"

namespace sluice {
namespace {

using RequestDescriptor = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;

absl::Status SizeError(absl::string_view what, absl::string_view text, size_t max) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is ", text.size(), " bytes (at most ", max, ")"));
}

// The field names of an error are built only once there is one: valid requests are the hot path.
absl::Status ValidateDescriptor(const RequestDescriptor& d, int i, const RequestLimits& limits) {
  const auto where = [i] { return absl::StrCat("descriptors[", i, "]"); };
  if (static_cast<size_t>(d.entries_size()) > limits.max_entries) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": too many entries: ",
                                                   d.entries_size(), " (at most ",
                                                   limits.max_entries, ")"));
  }
  for (int j = 0; j < d.entries_size(); ++j) {
    const auto& e = d.entries(j);
    const auto entry = [&] { return absl::StrCat(where(), ".entries[", j, "]"); };
    if (e.key().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(entry(), ".key must not be empty"));
    }
    if (e.key().size() > limits.max_key_bytes) {
      return SizeError(entry() + ".key", e.key(), limits.max_key_bytes);
    }
    if (e.value().size() > limits.max_key_bytes) {
      return SizeError(entry() + ".value", e.value(), limits.max_key_bytes);
    }
  }
  if (d.has_limit()) {
    const int unit = d.limit().unit();
    if (unit < static_cast<int>(TimeUnit::kSecond) || unit > static_cast<int>(TimeUnit::kWeek)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ".limit.unit must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or "
                                "YEAR (got ", unit, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRequest(const envoy::service::ratelimit::v3::RateLimitRequest& request,
                             const RequestLimits& limits) {
  if (request.domain().empty()) {
    return absl::InvalidArgumentError("domain must not be empty");
  }
  if (request.domain().size() > limits.max_key_bytes) {
    return SizeError("domain", request.domain(), limits.max_key_bytes);
  }
  if (request.descriptors().empty()) {
    return absl::InvalidArgumentError("descriptors must not be empty");
  }
  if (static_cast<size_t>(request.descriptors_size()) > limits.max_descriptors) {
    return absl::InvalidArgumentError(absl::StrCat("too many descriptors: ",
                                                   request.descriptors_size(), " (at most ",
                                                   limits.max_descriptors, ")"));
  }
  for (int i = 0; i < request.descriptors_size(); ++i) {
    if (absl::Status s = ValidateDescriptor(request.descriptors(i), i, limits); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
