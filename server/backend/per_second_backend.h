// Two backends behind one: checks of rules whose period is one second go to a second store,
// every other check to the main one. envoyproxy/ratelimit's REDIS_PERSECOND: per-second
// counters are the busiest and the shortest-lived, so a deployment may give them a Redis of
// their own. Checks that share a `group` are all-or-nothing and so are decided by one backend:
// a group with any check of a longer period goes whole to the main backend.
//
// Thread-safe as its two backends are (Backend's contract).
#pragma once

#include <memory>
#include <string>

#include "server/backend/backend.h"

namespace sluice {

class PerSecondBackend final : public Backend {
 public:
  // The period (LimitParams::period_us) that routes a check to `per_second`.
  static constexpr int64_t kPerSecondPeriodUs = 1'000'000;

  PerSecondBackend(std::unique_ptr<Backend> main, std::unique_ptr<Backend> per_second);

  // Decisions come back in the order of `checks`. When both backends get checks, `done` runs
  // once, after both answered (on the thread of the later one); a failure of either answers
  // the whole batch with that error, so the caller's failure policy decides every check.
  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                EvaluateCallback done) override;
  absl::string_view Name() const override { return main_->Name(); }
  bool Ready() const override { return main_->Ready() && per_second_->Ready(); }
  // The main backend's metrics, then the per-second one's with every name starting
  // "sluice_redis_" renamed "sluice_redis_per_second_", so that the families stay apart.
  void AppendMetrics(std::string* out) const override;
  // The admin API: each check's state read or deleted where Evaluate decides it (`done` once
  // both backends answered; a failure of either fails the call). The reset log is the main
  // backend's, which every replica shares, whichever backend holds a key's state.
  void Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) override;
  void Reset(absl::Span<const LimitCheck> checks, ResetCallback done) override;
  bool SharesResets() const override { return main_->SharesResets(); }
  void PublishResets(absl::Span<const std::string> storage_keys, PublishCallback done) override;
  void ReadResets(const std::string& cursor, ResetLogCallback done) override;

 private:
  const std::unique_ptr<Backend> main_;
  const std::unique_ptr<Backend> per_second_;
};

}  // namespace sluice
