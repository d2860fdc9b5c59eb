#include "server/backend/per_second_backend.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "server/common/mutex.h"

namespace sluice {
namespace {

// One Evaluate split over both backends: the decisions gathered in the caller's order, and
// the callback run by whichever side answers last.
struct SplitCall {
  std::vector<Decision> decisions;
  std::vector<size_t> main_index;        // caller index of each check sent to main
  std::vector<size_t> per_second_index;  // ... and to per_second
  std::atomic<int> pending{2};
  Mutex mu;  // guards status (each side writes disjoint decisions)
  absl::Status status;
  EvaluateCallback done;

  void Answer(const std::vector<size_t>& index, absl::Status side_status,
              absl::Span<const Decision> side) {
    if (side_status.ok()) {
      for (size_t i = 0; i < side.size(); ++i) {
        decisions[index[i]] = side[i];
      }
    } else {
      MutexLock lock(mu);
      if (status.ok()) {
        status = std::move(side_status);
      }
    }
  }
};

void Finish(std::unique_ptr<SplitCall> call) {
  if (call->status.ok()) {
    std::move(call->done)(absl::OkStatus(), call->decisions);
  } else {
    std::move(call->done)(std::move(call->status), {});
  }
}

}  // namespace

PerSecondBackend::PerSecondBackend(std::unique_ptr<Backend> main,
                                   std::unique_ptr<Backend> per_second)
    : main_(std::move(main)), per_second_(std::move(per_second)) {}

void PerSecondBackend::Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                                EvaluateCallback done) {
  // Route by group: a group stays per-second only if every member is.
  std::vector<bool> to_per_second(checks.size(), false);
  size_t per_second_count = 0;
  for (size_t i = 0; i < checks.size();) {
    size_t end = i + 1;
    bool all_per_second = checks[i].params.period_us == kPerSecondPeriodUs;
    // Groups are runs of consecutive checks with one group id (backend.h).
    while (end < checks.size() && checks[end].group == checks[i].group) {
      all_per_second = all_per_second && checks[end].params.period_us == kPerSecondPeriodUs;
      ++end;
    }
    for (size_t j = i; j < end; ++j) {
      to_per_second[j] = all_per_second;
    }
    per_second_count += all_per_second ? end - i : 0;
    i = end;
  }
  if (per_second_count == 0) {
    main_->Evaluate(checks, trace, std::move(done));
    return;
  }
  if (per_second_count == checks.size()) {
    per_second_->Evaluate(checks, trace, std::move(done));
    return;
  }
  auto call = std::make_unique<SplitCall>();
  call->decisions.resize(checks.size());
  call->done = std::move(done);
  std::vector<LimitCheck> main_checks;
  std::vector<LimitCheck> per_second_checks;
  main_checks.reserve(checks.size() - per_second_count);
  per_second_checks.reserve(per_second_count);
  for (size_t i = 0; i < checks.size(); ++i) {
    if (to_per_second[i]) {
      per_second_checks.push_back(checks[i]);
      call->per_second_index.push_back(i);
    } else {
      main_checks.push_back(checks[i]);
      call->main_index.push_back(i);
    }
  }
  // Both sides may answer on other threads, or inline; the last one finishes the call.
  SplitCall* raw = call.release();
  auto side = [raw](const std::vector<size_t>* index) {
    return [raw, index](absl::Status status, absl::Span<const Decision> decisions) {
      raw->Answer(*index, std::move(status), decisions);
      if (raw->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        Finish(std::unique_ptr<SplitCall>(raw));
      }
    };
  };
  main_->Evaluate(main_checks, trace, side(&raw->main_index));
  per_second_->Evaluate(per_second_checks, trace, side(&raw->per_second_index));
}

void PerSecondBackend::AppendMetrics(std::string* out) const {
  main_->AppendMetrics(out);
  std::string per_second;
  per_second_->AppendMetrics(&per_second);
  out->append(absl::StrReplaceAll(per_second, {{"sluice_redis_", "sluice_redis_per_second_"}}));
}

}  // namespace sluice
