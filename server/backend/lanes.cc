#include "server/backend/lanes.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice {

SplitRequest::SplitRequest(EvaluateCallback done, size_t checks, size_t parts)
    : decisions(checks), done_(std::move(done)), outstanding_(parts) {}

void SplitRequest::Finish(absl::Status status) {
  if (!status.ok()) {
    MutexLock lock(mu_);
    if (status_.ok()) {
      status_ = std::move(status);
    }
  }
  // acq_rel: the last part sees every decision and status the others wrote.
  if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  absl::Status final_status;
  {
    MutexLock lock(mu_);
    final_status = status_;
  }
  if (!final_status.ok()) {
    std::move(done_)(std::move(final_status), {});
  } else {
    std::move(done_)(absl::OkStatus(), decisions);
  }
}

Lanes::Lanes(size_t max_batch, int max_calls_out)
    : max_batch_(max_batch), max_calls_out_(max_calls_out) {}

LaneCalls Lanes::Enqueue(Algorithm algorithm,
                         absl::FunctionRef<void(std::vector<LaneCheck>&)> add) {
  Lane& lane = lanes_[static_cast<size_t>(algorithm)];
  MutexLock lock(lane.mu);
  add(lane.waiting);
  return TakeCalls(lane);
}

bool Lanes::TryTakeCall(Algorithm algorithm, size_t checks) {
  if (checks > max_batch_) {
    return false;
  }
  Lane& lane = lanes_[static_cast<size_t>(algorithm)];
  MutexLock lock(lane.mu);
  // What Enqueue would do with these checks alone in the lane: a full call leaves whatever is
  // out, fewer checks only while a call is free.
  if (!lane.waiting.empty() || (checks < max_batch_ && lane.in_flight >= max_calls_out_)) {
    return false;
  }
  CountCall(lane, checks);
  return true;
}

void Lanes::CountCall(Lane& lane, size_t checks) {
  ++lane.in_flight;
  lane.calls.store(lane.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  lane.checks.store(lane.checks.load(std::memory_order_relaxed) + checks,
                    std::memory_order_relaxed);
}

LaneCalls Lanes::CallReturned(Algorithm algorithm) {
  Lane& lane = lanes_[static_cast<size_t>(algorithm)];
  MutexLock lock(lane.mu);
  --lane.in_flight;
  return TakeCalls(lane);
}

LaneCalls Lanes::TakeCalls(Lane& lane) {
  LaneCalls calls;
  const auto take = [&](size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu) {
    CountCall(lane, n);
    LaneCall& call = calls.emplace_back();
    if (n == lane.waiting.size()) {
      call.swap(lane.waiting);
      return;
    }
    const auto split = lane.waiting.begin() + static_cast<ptrdiff_t>(n);
    call.assign(std::make_move_iterator(lane.waiting.begin()), std::make_move_iterator(split));
    lane.waiting.erase(lane.waiting.begin(), split);
  };
  // Full calls leave at once, however many are out: a lane never caps throughput.
  while (lane.waiting.size() >= max_batch_) {
    take(max_batch_);
  }
  // The rest waits for company while the lane has its calls out.
  if (!lane.waiting.empty() && lane.in_flight < max_calls_out_) {
    take(lane.waiting.size());
  }
  return calls;
}

uint64_t Lanes::calls(Algorithm algorithm) const {
  return lanes_[static_cast<size_t>(algorithm)].calls.load(std::memory_order_relaxed);
}

uint64_t Lanes::checks(Algorithm algorithm) const {
  return lanes_[static_cast<size_t>(algorithm)].checks.load(std::memory_order_relaxed);
}

void Lanes::AppendMetrics(std::string* out) const {
  std::string calls_text, checks_text;
  for (size_t a = 0; a < lanes_.size(); ++a) {
    const auto algorithm = static_cast<Algorithm>(a);
    if (algorithm == Algorithm::kFixedWindow) {
      continue;  // no lane: a lone fixed window runs without a script
    }
    const absl::string_view name = AlgorithmName(algorithm);
    absl::StrAppend(&calls_text, "sluice_redis_lane_calls_total{algorithm=\"", name, "\"} ",
                    calls(algorithm), "\n");
    absl::StrAppend(&checks_text, "sluice_redis_lane_checks_total{algorithm=\"", name, "\"} ",
                    checks(algorithm), "\n");
  }
  absl::StrAppend(out,
                  "# HELP sluice_redis_lane_calls_total Script calls sent by the algorithm's "
                  "lane (--redis_max_batch)\n"
                  "# TYPE sluice_redis_lane_calls_total counter\n",
                  calls_text,
                  "# HELP sluice_redis_lane_checks_total Checks decided by those calls (checks "
                  "per call: the mean batch)\n"
                  "# TYPE sluice_redis_lane_checks_total counter\n",
                  checks_text);
}

}  // namespace sluice
