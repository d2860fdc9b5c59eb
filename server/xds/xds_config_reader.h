// Reads envoyproxy/ratelimit's xDS config resources (ratelimit.config.ratelimit.v3
// RateLimitConfig, one domain each) into domain descriptions (config_description.h), which the
// one ConfigValidator checks exactly as it checks YAML: a snapshot's errors read like a file's,
// with the resource in place of the file and no line ("xds:<resource name>: descriptors[0].
// rate_limit.unit: ..."); where a file's message names the line of an earlier descriptor, this
// one names its path ("already defined at descriptors[0]"). A unit number the RateLimitUnit enum
// does not name is refused as a number ("unknown unit 99"). The management server's text in a
// message (resource name, type URL, key, value) is escaped and cut (LogText, log_text.h).
//
// The resource's fields are upstream's YAML fields. Sluice's own rule keys, which upstream's
// message has no field for, ride in a descriptor's `metadata` under the reserved key "sluice":
//
//   metadata { fields { key: "sluice" value { struct_value { fields {
//       key: "algorithm" value { string_value: "token_bucket" } } ... } } } }
//
// with the keys algorithm, burst, unit_multiplier, hash_tag and local_share (for the
// descriptor's rate_limit), value_to_metric and share_threshold (the descriptor's), and
// failure_mode (the domain's; on top-level descriptors only, all that give it agreeing). Any
// other key there is ignored, with one warning per key and snapshot in Config::warnings naming
// it and its first place (envoyproxy/ratelimit passes metadata through whole), unless
// ValidateOptions::strict (--strict_config), which refuses it; a known key with a value of the
// wrong type is refused either way. The "sluice" entry is taken out of the metadata: it is
// never returned in a response's dynamic metadata. A proto3 field at its default reads as not
// given, except requests_per_unit (0 is a limit that admits nothing, as in upstream).
//
// Pure functions; safe from any thread.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/repeated_field.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "server/config/config.h"
#include "server/config/config_description.h"
#include "server/config/config_validator.h"

namespace sluice {

inline constexpr absl::string_view kRateLimitConfigTypeUrl =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";
// The metadata key that carries Sluice's rule keys.
inline constexpr absl::string_view kSluiceMetadataKey = "sluice";

// Every resource of one state-of-the-world response, unpacked, read and validated whole; the
// warnings of unknown metadata.sluice keys come first, one per key over the snapshot. Errors
// are kInvalidArgument: "resources[2]: type.googleapis.com/...: not a RateLimitConfig" for a
// resource of another type or one that does not parse; otherwise the validator's message.
absl::StatusOr<std::unique_ptr<Config>> ConfigFromXdsResources(
    const google::protobuf::RepeatedPtrField<google::protobuf::Any>& resources,
    const ValidateOptions& options);

}  // namespace sluice
