// Text that arrived from outside the process (a Redis error reply, a Sentinel's answer, an xDS
// version or message, a request value), made fit for one log line: bytes that are not printable
// ASCII are written as \xNN, a backslash as \\, and the text is cut to a size, saying how long it
// was. A remote peer then cannot forge lines, ring terminals or grow the log by the megabyte.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// How much of a remote text a log line shows by default.
inline constexpr size_t kLogTextMaxBytes = 256;

// `text` escaped as above, at most `max_bytes` of its input shown; a longer text ends with
// "...(N bytes)" naming its whole length.
std::string LogText(absl::string_view text, size_t max_bytes = kLogTextMaxBytes);

// How much of a status's message LogStatus shows by default: Sluice's own words around the
// remote text ("exporting 512 spans by OTLP/HTTP to ...: ") need room beside it.
inline constexpr size_t kLogStatusMaxBytes = 512;

// `status` for a log line: "UNAVAILABLE: <message>" (the code's canonical name, the message
// through LogText), or "OK". Payloads are never shown: they are bytes meant for programs (a
// failure reason, failure_reason.h, is one byte), and operator<< or ToString() would write them
// raw, e.g. [sluice/failure_reason='\x07']. A caller that wants the failure reason names it.
std::string LogStatus(const absl::Status& status, size_t max_bytes = kLogStatusMaxBytes);

}  // namespace sluice
