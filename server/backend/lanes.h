// Lanes: on a standalone Redis, lone checks of one algorithm from any requests share script
// calls (the algorithm's batch script), so that Redis pays a call's fixed cost once for many.
//
// The rule, per algorithm (one lane each): a full call (max_batch checks) leaves at once,
// however many calls are out, so a lane never caps throughput. Fewer checks leave at once only
// while the lane has fewer than `max_calls_out` calls out (one per Redis connection, at least
// 2); otherwise they wait for company until one of its calls returns. Under light load every
// check leaves at once; under heavy load checks of many requests share calls, having waited at
// most one call's round trip. A lane call's deadline is the earliest of its checks', so no
// check waits past its own budget.
//
// This class only queues and hands out calls; the Redis backend sends them and reports each
// return (CallReturned), which is when waiting checks leave.
// Thread-safe: each lane has its own mutex, held only to queue or take checks.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "server/algorithm/algorithm.h"
#include "server/backend/backend.h"
#include "server/common/mutex.h"

namespace sluice {

// A request answered in several parts (its own batch, and lane calls): decisions land by check
// index from whichever thread answers a part; the last part to finish calls `done`, with every
// decision, or with the first failure if any part failed.
class SplitRequest {
 public:
  SplitRequest(EvaluateCallback done, size_t checks, size_t parts);
  // One part answered; on OK its decisions are already stored.
  void Finish(absl::Status status);

  absl::InlinedVector<Decision, 2> decisions;  // by check index; each written by one part
  // The decision's span, for the lane calls that carry its checks (set before any is queued).
  TraceParent trace;

 private:
  EvaluateCallback done_;
  std::atomic<size_t> outstanding_;
  Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // the first failure
};

// A lone check waiting in, or sent from, its algorithm's lane.
struct LaneCheck {
  std::shared_ptr<SplitRequest> request;
  uint32_t index = 0;  // in the request's checks
  std::string key;
  LimitParams params;
  uint64_t hits = 0;
  bool refund = false;  // LimitCheck::refund
  int64_t now_us = 0;
  // Monotonic: the request's arrival plus its budget. Waiting in the lane is charged to it only
  // beyond the queue grace (see RedisBackend::SendLaneCall).
  int64_t deadline_us = 0;
};

// One script call's checks (not empty), and the calls free to leave at one moment.
using LaneCall = std::vector<LaneCheck>;
using LaneCalls = absl::InlinedVector<LaneCall, 1>;

class Lanes {
 public:
  // REQUIRES: max_batch >= 1, max_calls_out >= 1.
  Lanes(size_t max_batch, int max_calls_out);

  // Queues checks of `algorithm`: `add` appends them to the lane's queue, under the lane's
  // lock (so that one request's checks stay together). Returns the calls that may leave now;
  // the caller sends each and reports its return.
  LaneCalls Enqueue(Algorithm algorithm, absl::FunctionRef<void(std::vector<LaneCheck>&)> add);

  // Takes a call of `checks` checks of `algorithm` for the caller to send in its own batch,
  // when the lane would let them leave at once anyway: nothing waits in it, and it has fewer
  // than max_calls_out calls out (or the checks make a full call). Counted as a call of the
  // lane, whose return the caller reports (CallReturned) like any other. Spares the caller the
  // copy into the lane and the request's split in parts. False for more than max_batch checks
  // (they make several calls: the lane splits them). REQUIRES: checks >= 1.
  bool TryTakeCall(Algorithm algorithm, size_t checks);

  // A call of `algorithm`'s lane returned (answered or failed). Returns the calls that may
  // leave now.
  LaneCalls CallReturned(Algorithm algorithm);

  // Calls sent by `algorithm`'s lane and the checks they carried (their ratio is the mean
  // batch).
  uint64_t calls(Algorithm algorithm) const;
  uint64_t checks(Algorithm algorithm) const;
  // Both, per lane, in the Prometheus text format (no lane for the fixed window, whose lone
  // checks run without a script).
  void AppendMetrics(std::string* out) const;

 private:
  struct Lane {
    Mutex mu;
    std::vector<LaneCheck> waiting ABSL_GUARDED_BY(mu);
    int in_flight ABSL_GUARDED_BY(mu) = 0;  // calls out
    // Written under mu, read relaxed by metrics.
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> checks{0};
  };

  // Every full call, then the rest if the lane has fewer than max_calls_out_ calls out.
  LaneCalls TakeCalls(Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // One more call of `checks` checks out.
  static void CountCall(Lane& lane, size_t checks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);

  const size_t max_batch_;
  const int max_calls_out_;
  std::array<Lane, kAlgorithmCount> lanes_;  // indexed by Algorithm
};

}  // namespace sluice
