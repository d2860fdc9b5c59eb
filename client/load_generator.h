// The engine of sluice-bench: drives ShouldRateLimit calls at any RLS v3 server, closed loop
// (a fixed number of calls always in flight, as fast as the server answers) or open loop (calls
// sent on a fixed schedule, whatever the server does), and measures what came back.
//
// Cost: the generator must stay cheaper per call than the server it drives, so it uses gRPC's
// completion-queue API with `threads` polling threads (default one), each re-sending from its
// own completions, plus, in open loop, the calling thread as the pacer that sleeps until the
// next send is due. Each in-flight slot owns its request message, built once with every
// descriptor; a send only overwrites the descriptor values (strings precomputed for the whole
// keyspace, assigned into capacity the message already holds) and clears the response.
//
// Open-loop latency is measured from each call's INTENDED send time (schedule start + i /
// rate), not from when it was actually sent: if the generator falls behind (no free slot, or it
// overslept), the delay counts in the latency, so a stalled server cannot hide its stall by
// slowing the generator down (coordinated omission). A due call is sent by whichever thread
// gets to it first: the pacer, or a completion thread that has just freed a slot, so that an
// overloaded open loop runs as cheaply as a closed one. Calls scheduled inside the measured
// interval but never sent by its end are counted as `unsent` and recorded with the lower bound
// of their latency (end of interval - intended time).
//
// Thread-safety: RunLoad is a blocking function; it may be called from one thread at a time per
// LoadOptions. `on_phase` runs on the calling thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/latency_histogram.h"

namespace sluice {

struct LoadOptions {
  // HOST:PORT of the RLS v3 server.
  std::string server;
  // Calls in flight at once: exactly this many in closed loop, at most this many in open loop.
  int concurrency = 64;
  // Open loop: calls sent per second, evenly spaced. 0: closed loop.
  double rate = 0;
  // The measured interval, after a warm-up whose calls are sent but not counted.
  absl::Duration duration = absl::Seconds(10);
  absl::Duration warmup = absl::Seconds(1);
  std::string domain = "bench";
  // Descriptor i (0-based) of every request is the single entry key_i=<value>, key_0 = `key`,
  // key_i = `key` + (i + 1) after it; each value drawn uniformly among `keyspace` values.
  std::string key = "key";
  int keyspace = 1000;
  int descriptors = 1;
  // hits_addend of every request; 0 leaves it unset (the server's default of 1).
  uint32_t hits = 0;
  // gRPC channels (each its own HTTP/2 connection); calls take them round-robin.
  int channels = 4;
  // Completion-queue polling threads.
  int threads = 1;
  // Deadline of every call.
  absl::Duration timeout = absl::Seconds(5);
  // Seed of the value choice; the same seed sends the same sequence of values.
  uint64_t seed = 1;
  // How long to wait for every channel to connect before giving up.
  absl::Duration connect_timeout = absl::Seconds(10);

  enum class Phase { kMeasuring, kMeasured };
  // Called when the measured interval begins and when it ends (e.g. to sample the server's CPU).
  std::function<void(Phase)> on_phase;
};

struct LoadResult {
  // Calls whose (intended) send time fell in the measured interval and that completed.
  uint64_t requests = 0;
  // Of those: answered with overall_code OK, OVER_LIMIT, or another code (UNKNOWN).
  uint64_t ok = 0;
  uint64_t over_limit = 0;
  uint64_t other_code = 0;
  // Per-descriptor statuses of the answered calls.
  uint64_t descriptor_ok = 0;
  uint64_t descriptor_over_limit = 0;
  // Calls that failed, by gRPC status code (index = code).
  std::array<uint64_t, 17> errors_by_code{};
  uint64_t errors() const;
  // Open loop: calls scheduled in the measured interval but not sent before it ended.
  uint64_t unsent = 0;
  // Calls that completed inside the measured interval, whenever they were scheduled: the
  // throughput actually served. Equal to `requests` give or take the calls in flight at either
  // end, except in an overloaded open loop, where calls scheduled during the warm-up complete
  // in the interval and calls of the interval are left unsent.
  uint64_t completed_in_interval = 0;

  double duration_s = 0;
  // Call latency in nanoseconds (open loop: from the intended send time).
  LatencyHistogram latency;
  // Open loop: how late calls were sent, actual - intended, in nanoseconds.
  LatencyHistogram send_lag;

  // This process's CPU over the measured interval (every thread, gRPC's own included).
  double cpu_user_s = 0;
  double cpu_sys_s = 0;
  // Threads of this process while measuring (gRPC starts some of its own).
  int process_threads = 0;
};

// Runs the load described by `options`. Fails with kInvalidArgument on bad options and
// kUnavailable when a channel cannot connect; call errors are counted, not returned.
absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options);

}  // namespace sluice
