// The client side of Sluice's admin API (POST /admin/inspect and /admin/reset on its HTTP
// address, server/service/admin_service.h), the base of `sluicectl inspect` and `sluicectl
// reset`: the request (a RateLimitRequest as JSON, with an optional limit override), the call
// (libcurl, HTTP/1.1, a bearer token, no proxy: the token goes to the address named and nowhere
// else), and the answers as readable text.
// Pure functions but AdminPost, which blocks for one call. Thread-safe once libcurl's global
// state is made (curl_global_init, before any thread).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace sluice {

// The JSON body of an admin call: `domain` and one descriptor per "key=value[,key=value...]"
// (as sluicectl check takes them), each with the limit override `limit` ("N/unit", unit one of
// second, minute, hour, day, week, month, year) when not empty. kInvalidArgument naming what is
// wrong.
absl::StatusOr<std::string> AdminRequestJson(absl::string_view domain,
                                             const std::vector<std::string>& descriptors,
                                             absl::string_view limit);

struct AdminAnswer {
  long status = 0;  // the HTTP status
  std::string body;
};

// POSTs `json` to http://<http_address><path> (http_address HOST:PORT) with `token` as its bearer
// token (none when empty), within `timeout`. kUnavailable when no answer came (libcurl's
// reason); any HTTP status is an answer.
absl::StatusOr<AdminAnswer> AdminPost(const std::string& http_address, absl::string_view path,
                                      const std::string& json, const std::string& token,
                                      absl::Duration timeout);

// An /admin/inspect answer as text: per rule, a table of what the store holds, what a check of
// 0 hits would answer and this replica's cache entry:
//   user=alice  fixed_window 2/minute (charge if_admitted)
//     storage key    sluice:{d|user=alice}fw:60
//     window         sluice:{d|user=alice}fw:60:w29936248  (ttl 23.290s)
//     state          count=2 window_start_us=1796174880000000
//     0 hits now     allowed, remaining 0, reset in 23.290s
//     cache here     denies >= 1 hits for 23.287s (limit 2)
// kInvalidArgument when `json` is not such an answer.
absl::StatusOr<std::string> FormatInspectAnswer(absl::string_view json);

// An /admin/reset answer as text: the keys deleted, the cache entries forgotten here, what the
// other replicas learn, the result.
absl::StatusOr<std::string> FormatResetAnswer(absl::string_view json);

}  // namespace sluice
