// The key of the reset log on Redis: the stream through which replicas tell each other which
// storage keys an operator reset (Backend::PublishResets, ReadResets; RedisBackend keeps it):
//
//   <prefix>{sluice_reset_log}
//
// One key, so one hash slot on a Redis Cluster (the braces are its hash tag). No storage key can
// be it: a storage key's tag always holds '|' after the domain (storage_key.h), an upstream
// window key ends in a digit or "s" (upstream_key.h), and the quota exchange's tag starts
// "rlqs|".
// Like storage_key.h, this file owns the format; nothing else spells it. Pure; thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

std::string ResetLogKey(absl::string_view prefix);

}  // namespace sluice
