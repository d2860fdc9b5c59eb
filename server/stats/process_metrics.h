// The standard process metrics of Prometheus' client libraries (process_cpu_seconds_total,
// process_open_fds, process_max_fds, process_virtual_memory_bytes,
// process_resident_memory_bytes, process_start_time_seconds), read from /proc at scrape time,
// in the text format. Envoy Gateway's rate-limit dashboard plots the two memory series from
// the rate limit service's Prometheus port.
//
// Thread-safe (reads /proc/self only).
#pragma once

#include <string>

namespace sluice {

// The six series with their HELP and TYPE lines; a series whose source cannot be read is left
// out.
std::string ProcessMetricsText();

}  // namespace sluice
