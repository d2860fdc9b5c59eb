// Glob matching for descriptors in the config: a `*` in a configured value (or, matched against
// the request's "key_value", in a key: DescriptorNode::key_wildcard) matches any run of
// characters, possibly empty, and every other character matches itself, as
// envoyproxy/ratelimit's wildcardMatch (config_impl.go) does.
//
// Pure functions on their arguments; safe to call from any thread. No allocation.
#pragma once

#include "absl/strings/string_view.h"

namespace sluice {

// True if `value` contains a `*`, i.e. it is a pattern rather than an exact value.
inline bool IsWildcardPattern(absl::string_view value) {
  return value.find('*') != absl::string_view::npos;
}

// True if `text` matches `pattern` in full. `*` is the only special character (there is no
// escape: a configured value cannot match a literal `*` only). Runs in O(|pattern| * |text|) in
// the worst case and linear time for the usual `prefix*` and `*suffix` shapes.
bool WildcardMatch(absl::string_view pattern, absl::string_view text);

}  // namespace sluice
