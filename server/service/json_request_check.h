// The check a POST /json body passes before protobuf parses it as an
// envoy.service.ratelimit.v3.RateLimitRequest. Protobuf's JSON parser (3.21) is lenient (nested
// arrays flattened, the last of duplicate keys wins, single quotes, unquoted keys, trailing
// commas) and slow on some shapes (seconds of CPU for 4 MB of brackets), and it runs on the HTTP
// thread, which also answers health checks. This check is strict RFC 8259 plus what the
// request's JSON mapping allows, in one pass with a fixed-size stack, stopping at the first fault.
//
// The request's JSON mapping (rls.proto, ratelimit.proto) has objects at most five levels deep,
// no field that takes an array of arrays (no google.protobuf.Value, ListValue or Struct), at most
// three fields per object, and two arrays: descriptors and their entries.
//
// Pure; thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// Objects and arrays open at once, the request's own object included.
inline constexpr int kMaxJsonRequestDepth = 16;
// Keys of one object: duplicates are looked for among them, so their number is bounded.
inline constexpr size_t kMaxJsonObjectMembers = 16;

// OK, or kInvalidArgument with a message saying what is wrong and at which byte offset of
// `body` ("duplicate key \"domain\" at byte 14 (first at byte 1)"). Refused:
//   - anything that is not RFC 8259 JSON: one value and nothing but whitespace after it; strings
//     with valid escapes, no raw control characters and valid UTF-8 (no lone surrogates either);
//     numbers as the grammar writes them; only the literals true, false and null;
//   - a top-level value that is not an object;
//   - more than kMaxJsonRequestDepth levels, found as they open;
//   - an array directly inside an array;
//   - an array of more than `max_array_elements` elements (the caller passes the most
//     descriptors or entries a request may have), or an object of more than
//     kMaxJsonObjectMembers keys;
//   - two keys of one object that name the same field: equal once unescaped and written as
//     protobuf's JSON name (lowerCamelCase), so that "hits_addend" and "hitsAddend" are one.
// Field names and value types are protobuf's to check: the body may still fail to parse.
// Time is linear in the body's size; memory is a fixed few kilobytes of stack.
absl::Status CheckRateLimitRequestJson(absl::string_view body, size_t max_array_elements);

}  // namespace sluice
