// Who may call the admin API (POST /admin/inspect and /admin/reset, admin_service.h): it is off
// unless --admin_api; on, a caller must present the token of --admin_token_file as
// `Authorization: Bearer <token>`, or, without a token file, the HTTP listeners must be on
// loopback only (ValidateSettings refuses the start otherwise), so that only this host's users
// reach it. Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

// (The token of --admin_token_file is read by ReadSecretFile, server/common/flag_file.h.)

// Whether `authorization` (an Authorization header's value; null when absent) is "Bearer
// <token>" (the scheme's case aside, as RFC 9110 reads it) for `token`, compared in constant
// time. An empty `token` requires nothing: always true.
bool AdminAuthorized(const char* authorization, absl::string_view token);

// a == b, in time that depends on their lengths only, never on where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace sluice
