// What the chaos and network-fault tests share: open-loop load over several Sluice replicas at
// once, and the failure-policy counters of their /metrics. Header-only: the tests in this
// directory are the only users.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/latency_histogram.h"
#include "client/load_generator.h"
#include "gtest/gtest.h"
#include "tests/support/host_stalls.h"
#include "tests/support/process.h"
#include "tests/support/sanitizers.h"
#include "tests/support/sluice_server.h"

namespace sluice::chaos {

// What the failure policy answered, from sluice_backend_failures_total{reason} (requests) and
// sluice_failure_policy_decisions_total{mode} (descriptors).
struct PolicyCounters {
  std::map<std::string, double> failures_by_reason;
  double policy_decisions = 0;

  PolicyCounters& operator+=(const PolicyCounters& other) {
    for (const auto& [reason, count] : other.failures_by_reason) {
      failures_by_reason[reason] += count;
    }
    policy_decisions += other.policy_decisions;
    return *this;
  }
  PolicyCounters Minus(const PolicyCounters& before) const {
    PolicyCounters diff = *this;
    for (const auto& [reason, count] : before.failures_by_reason) {
      diff.failures_by_reason[reason] -= count;
    }
    diff.policy_decisions -= before.policy_decisions;
    return diff;
  }
  // "circuit_open 30, timeout_in_flight 4", or "-".
  std::string Reasons() const {
    std::vector<std::string> parts;
    for (const auto& [reason, count] : failures_by_reason) {
      if (count > 0) parts.push_back(absl::StrCat(reason, " ", count));
    }
    return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
  }
};

inline constexpr bool kSanitized = SLUICE_TEST_SANITIZED;

// Checks that the replicas did not stall in a run of `decisions` decisions, `unsent` of whose
// calls the generator never got to send before the run ended. A stall leaves hundreds unsent (a
// second's schedule); a starved machine (a sanitized build beside other jobs on 2 cores) leaves a
// few of the last milliseconds' calls behind busy slots: at most 1% of the decisions, and one.
inline void ExpectNoStall(const std::string& phase, uint64_t unsent, uint64_t decisions) {
  if (unsent == 0) {
    return;
  }
  std::printf("note: %s: %llu calls unsent at the end (at most 1%% allowed)\n", phase.c_str(),
              static_cast<unsigned long long>(unsent));
  EXPECT_LE(static_cast<double>(unsent), std::max(1.0, 0.01 * static_cast<double>(decisions)))
      << phase << ": calls were never sent: the replicas stalled";
}

// Reads the policy counters off a Prometheus text page.
inline PolicyCounters ParsePolicyCounters(const std::string& page) {
  PolicyCounters counters;
  constexpr absl::string_view kFailures = "sluice_backend_failures_total{reason=\"";
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    const size_t space = line.rfind(' ');
    double count = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &count)) {
      continue;
    }
    if (absl::StartsWith(line, kFailures)) {
      absl::string_view rest = line.substr(kFailures.size());
      counters.failures_by_reason[std::string(rest.substr(0, rest.find('"')))] += count;
    } else if (absl::StartsWith(line, "sluice_failure_policy_decisions_total{")) {
      counters.policy_decisions += count;
    }
  }
  return counters;
}

// The counters summed over every replica.
inline PolicyCounters ScrapePolicy(
    const std::vector<std::unique_ptr<testing::SluiceServer>>& servers) {
  PolicyCounters total;
  for (const auto& server : servers) {
    total += ParsePolicyCounters(testing::HttpGet(server->http_port(), "/metrics"));
  }
  return total;
}

// A stall of the host shorter than this is ordinary load (the scheduler of a busy machine
// delays a woken thread by a millisecond or two): it cannot push a decision past the tests'
// 10 ms budget unless that decision was already half way there.
inline constexpr absl::Duration kHostStallThreshold = absl::Milliseconds(5);

// One open-loop run over every replica, summed, and the host's stalls while it ran.
struct LoadSummary {
  uint64_t decisions = 0;
  uint64_t errors = 0;
  uint64_t unsent = 0;
  uint64_t admitted = 0;  // descriptors answered OK
  LatencyHistogram latency;
  double rate = 0;  // requests/s, every replica's together
  testing::HostStalls stalls;

  double p99_ms() const { return static_cast<double>(latency.ValueAtQuantile(0.99)) / 1e6; }

  // The decisions a stall of the host may have made late: those sent within `budget` before
  // one or during one (HostStalls::CallsExposed). They are not judged on time.
  uint64_t Exposed(absl::Duration budget) const {
    return std::min(decisions, stalls.CallsExposed(rate, budget));
  }

  // The latency at quantile `q`, in ms, of the decisions no stall touched, taking the exposed
  // ones to be the slowest (the most lenient reading). 1.0 is the slowest.
  double QuantileMsOfUnexposed(double q, absl::Duration budget) const {
    const double n = static_cast<double>(latency.count());
    const double exposed = std::min(n, static_cast<double>(Exposed(budget)));
    if (n == 0 || exposed == n) return 0;
    return static_cast<double>(latency.ValueAtQuantile(q * (n - exposed) / n)) / 1e6;
  }
};

// The share of a recovered phase's decisions whose backend call may time out (below).
inline constexpr double kRecoveredTimeoutShare = 0.005;

// Checks a phase after the faults are gone, run as `load` with a backend budget of `budget`,
// whose failures are `policy`: nothing failed for a reason that means a node is not back
// (connection, circuit_open, loading, ...): exact. A timeout there is the scheduler of a busy
// 2-core machine, not Redis: at most kRecoveredTimeoutShare of the decisions, plus those a stall
// of the host exposed (a virtual CPU taken away for 40 ms times out every call in flight on it),
// and not judged under sanitizers, which slow everything several times (as latency is not).
// Prints what it saw.
inline void ExpectRecovered(const std::string& phase, const PolicyCounters& policy,
                            const LoadSummary& load, absl::Duration budget) {
  double timeouts = 0;
  double others = 0;
  for (const auto& [reason, count] : policy.failures_by_reason) {
    (absl::StartsWith(reason, "timeout_") ? timeouts : others) += count;
  }
  EXPECT_EQ(others, 0) << phase << ": " << policy.Reasons();
  if (timeouts == 0) {
    return;
  }
  const double exposed = static_cast<double>(load.Exposed(budget));
  const double allowed = kRecoveredTimeoutShare * static_cast<double>(load.decisions) + exposed;
  std::printf("note: %s: %.0f timeouts of %llu decisions; host stalls %s exposed %.0f; at most "
              "%.0f allowed%s\n",
              phase.c_str(), timeouts, static_cast<unsigned long long>(load.decisions),
              load.stalls.Describe().c_str(), exposed, allowed,
              kSanitized ? " (sanitized build: not checked)" : "");
  if (!kSanitized) {
    EXPECT_LE(timeouts, allowed) << phase << ": " << policy.Reasons();
  }
}

// The settings every generator of a run shares; `server`, `rate` and `seed` are set per replica.
inline LoadOptions OpenLoopOptions(const std::string& domain, int keyspace, int descriptors,
                                   absl::Duration duration) {
  LoadOptions options;
  options.concurrency = 64;
  options.duration = duration;
  options.warmup = absl::ZeroDuration();
  options.domain = domain;
  options.key = "key";
  options.keyspace = keyspace;
  options.descriptors = descriptors;
  options.channels = 1;
  options.timeout = absl::Seconds(2);
  return options;
}

// Runs `options` at `rate` requests/s in all, one generator per replica with its share, while
// `during` (if set) runs on the calling thread; returns when both are done.
inline LoadSummary RunOpenLoop(const std::vector<std::unique_ptr<testing::SluiceServer>>& servers,
                               LoadOptions options, double rate, uint64_t seed,
                               const std::function<void()>& during = {}) {
  std::vector<absl::StatusOr<LoadResult>> results(servers.size(), absl::UnknownError("not run"));
  std::vector<std::thread> load;
  testing::HostStallProbe probe(kHostStallThreshold);
  for (size_t i = 0; i < servers.size(); ++i) {
    LoadOptions mine = options;
    mine.server = servers[i]->grpc_address();
    mine.rate = rate / static_cast<double>(servers.size());
    mine.seed = seed * 100 + i + 1;
    load.emplace_back([&results, i, mine] { results[i] = RunLoad(mine); });
  }
  if (during) during();
  for (auto& thread : load) thread.join();
  LoadSummary summary;
  summary.rate = rate;
  summary.stalls = probe.Stop();
  for (const auto& result : results) {
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) continue;
    summary.decisions += result->requests;
    summary.errors += result->errors();
    summary.unsent += result->unsent;
    summary.admitted += result->descriptor_ok;
    summary.latency.Merge(result->latency);
  }
  return summary;
}

}  // namespace sluice::chaos
