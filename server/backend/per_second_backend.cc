#include "server/backend/per_second_backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
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

// Which checks go to the per-second backend: a group stays per-second only if every member is.
std::vector<bool> RouteToPerSecond(absl::Span<const LimitCheck> checks) {
  std::vector<bool> to_per_second(checks.size(), false);
  for (size_t i = 0; i < checks.size();) {
    size_t end = i + 1;
    bool all_per_second = checks[i].params.period_us == PerSecondBackend::kPerSecondPeriodUs;
    // Groups are runs of consecutive checks with one group id (backend.h).
    while (end < checks.size() && checks[end].group == checks[i].group) {
      all_per_second = all_per_second &&
                       checks[end].params.period_us == PerSecondBackend::kPerSecondPeriodUs;
      ++end;
    }
    for (size_t j = i; j < end; ++j) {
      to_per_second[j] = all_per_second;
    }
    i = end;
  }
  return to_per_second;
}

// An admin API call split over both backends: each side's results gathered in the caller's
// order, and `done` run by whichever side answers last (a failure of either fails the call).
template <typename Result>
struct SplitAdminCall {
  using Done = absl::AnyInvocable<void(absl::Status, std::vector<Result>) &&>;
  std::vector<Result> results;
  std::atomic<int> pending{2};
  Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
  Done done;

  // Runs `operation` on each side with its checks, and `done` once both answered. `place`
  // stores one side's results: (side's index map, side's results, all results).
  template <typename Operation, typename Place>
  static void Run(absl::Span<const LimitCheck> checks, const std::vector<bool>& to_per_second,
                  Backend& main, Backend& per_second, Operation operation, Place place,
                  Done done) {
    auto call = std::make_shared<SplitAdminCall>();
    call->done = std::move(done);
    std::vector<LimitCheck> sides[2];
    auto index = std::make_shared<std::array<std::vector<size_t>, 2>>();
    for (size_t i = 0; i < checks.size(); ++i) {
      const int side = to_per_second[i] ? 1 : 0;
      sides[side].push_back(checks[i]);
      (*index)[side].push_back(i);
    }
    Backend* backends[2] = {&main, &per_second};
    for (int side = 0; side < 2; ++side) {
      operation(*backends[side], sides[side],
                [call, index, side, place](absl::Status status,
                                           std::vector<Result> results) mutable {
                  {
                    MutexLock lock(call->mu);
                    if (status.ok()) {
                      place((*index)[side], std::move(results), call->results);
                    } else if (call->status.ok()) {
                      call->status = std::move(status);
                    }
                  }
                  if (call->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                    absl::Status final_status;
                    {
                      MutexLock lock(call->mu);
                      final_status = call->status;
                    }
                    std::move(call->done)(final_status,
                                          final_status.ok() ? std::move(call->results)
                                                            : std::vector<Result>{});
                  }
                });
    }
  }
};

}  // namespace

PerSecondBackend::PerSecondBackend(std::unique_ptr<Backend> main,
                                   std::unique_ptr<Backend> per_second)
    : main_(std::move(main)), per_second_(std::move(per_second)) {}

void PerSecondBackend::Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                                EvaluateCallback done) {
  const std::vector<bool> to_per_second = RouteToPerSecond(checks);
  const size_t per_second_count =
      static_cast<size_t>(std::count(to_per_second.begin(), to_per_second.end(), true));
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

// ---- The admin API: each check's state where Evaluate would decide it; the reset log is the
// main backend's, which every replica shares.

void PerSecondBackend::Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) {
  std::vector<bool> to_per_second = RouteToPerSecond(checks);
  const size_t reports = checks.size();
  SplitAdminCall<StateReport>::Run(
      checks, to_per_second, *main_, *per_second_,
      [](Backend& backend, std::vector<LimitCheck>& side,
         absl::AnyInvocable<void(absl::Status, std::vector<StateReport>) &&> side_done) {
        backend.Inspect(side, std::move(side_done));
      },
      [reports](const std::vector<size_t>& index, std::vector<StateReport> side,
                std::vector<StateReport>& all) {
        all.resize(reports);
        for (size_t i = 0; i < side.size() && i < index.size(); ++i) {
          all[index[i]] = std::move(side[i]);
        }
      },
      std::move(done));
}

void PerSecondBackend::Reset(absl::Span<const LimitCheck> checks, ResetCallback done) {
  SplitAdminCall<std::string>::Run(
      checks, RouteToPerSecond(checks), *main_, *per_second_,
      [](Backend& backend, std::vector<LimitCheck>& side,
         absl::AnyInvocable<void(absl::Status, std::vector<std::string>) &&> side_done) {
        backend.Reset(side, std::move(side_done));
      },
      [](const std::vector<size_t>&, std::vector<std::string> side,
         std::vector<std::string>& all) {
        for (std::string& key : side) {
          all.push_back(std::move(key));
        }
      },
      std::move(done));
}

void PerSecondBackend::PublishResets(absl::Span<const std::string> storage_keys,
                                     PublishCallback done) {
  main_->PublishResets(storage_keys, std::move(done));
}

void PerSecondBackend::ReadResets(const std::string& cursor, ResetLogCallback done) {
  main_->ReadResets(cursor, std::move(done));
}

}  // namespace sluice
