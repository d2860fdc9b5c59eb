// Emulated Envoys for a Rate Limit Quota Service (sluice-bench --rlqs): each one opens its own
// stream, sees requests for one bucket at a steady rate of its own, admits or denies each with
// the local token bucket the server assigned it (everything until the first assignment, as
// Envoy's `no_assignment_behavior: ALLOW_ALL`; the last one kept once it expires, as
// `reuse_last_assignment`), sends a first report at once and then one every report interval
// (whole seconds, as Envoy), and counts what it admitted. A token bucket starts full whenever
// its parameters change, and refills continuously at tokens_per_fill / fill_interval, as Envoy's.
// The requests are arrivals on a clock, not calls: what is measured is the server's division.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {

struct RlqsEmulationOptions {
  std::string server = "127.0.0.1:8081";  // one replica; `servers` when set
  std::vector<std::string> servers;       // Envoy i talks to servers[i % size]
  std::string domain = "bench";
  std::vector<std::pair<std::string, std::string>> bucket = {{"route", "bench"}};
  std::vector<double> demands;  // requests per second, one per Envoy
  int64_t report_interval_s = 2;
  double warmup_s = 6;    // run first, left out of the measure
  double duration_s = 10;
  bool verbose = false;  // every assignment on stderr
  // >= 0: that Envoy leaves (closes its stream) when the warmup ends, and the measure starts
  // `settle_intervals` report intervals later: how soon the others hold their new shares.
  int leave = -1;
  int settle_intervals = 3;
};

struct RlqsEnvoyResult {
  double demand = 0;        // requests per second asked
  double admitted_per_s = 0;
  uint64_t assignments = 0;  // assignments received
  std::string error;         // the stream's end, if it ended early
};

struct RlqsEmulationResult {
  std::vector<RlqsEnvoyResult> envoys;
  double measured_s = 0;
};

absl::StatusOr<RlqsEmulationResult> RunRlqsEmulation(const RlqsEmulationOptions& options);

// Max-min fair shares of `limit` among `demands` (the reference the results are judged by:
// every demand below an equal part of what is left is met, the rest share equally).
std::vector<double> MaxMinFairShares(double limit, const std::vector<double>& demands);

// Jain's fairness index of `x`: (sum x)^2 / (n * sum x^2), 1 when all are equal.
double JainIndex(const std::vector<double>& x);

}  // namespace sluice
