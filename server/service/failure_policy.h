// The failure policy as a step of a decision: what answers the checks a failed backend call left
// undecided. The domain's failure_mode (else the default) says: allow (OK), deny (OVER_LIMIT), or
// local: decided here, in process, each check against this replica's share of its rule
// (LocalFallback). A call that Redis refused for its arguments (FailureReason::kArgument: a bug,
// or a key something else overwrote, never Redis being unavailable) is always decided locally,
// so that nothing a client sends can turn into the policy's admission.
// Thread-safe: LocalFallback is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/backend/memory_backend.h"
#include "server/common/clock.h"
#include "server/config/failure_mode.h"
#include "server/service/local_fallback.h"
#include "server/service/request_plan.h"

namespace sluice {

class FailurePolicy {
 public:
  // `backend_name` names the backend in the log; the rest configures the in-process store
  // (LocalFallback's constructor). `clock` must outlive the policy. REQUIRES: replicas_hint >= 1.
  FailurePolicy(absl::string_view backend_name, const Clock& clock, uint32_t replicas_hint,
                MemoryBackendOptions store_options)
      : backend_name_(backend_name), local_(clock, replicas_hint, std::move(store_options)) {}

  // After a backend call failed with `status`: returns the mode that answers the checks still
  // undecided. With kLocal they are decided here (DecidedBy::kLocal), so none is left; with
  // kAllow or kDeny they stay undecided and Respond answers them. Logs at most every 10 s.
  // REQUIRES: !status.ok().
  FailureMode Apply(const absl::Status& status, RequestPlan& plan, CheckDecisions& decisions);

  // Gives `hits` back to the in-process store on `check`'s key (a refund of `check`, its params
  // scaled to this replica's share as DecideLocally scales them): the release of acquisitions
  // this store decided while the backend could not (UnbackedStep).
  // REQUIRES: check.refund; `local_share` is the rule's.
  void GiveBackLocally(const LimitCheck& check, std::optional<double> local_share, uint64_t hits);

  // The in-process store's metrics (sluice_local_fallback_*), once it exists.
  void AppendMetrics(std::string* out) const { local_.AppendMetrics(out); }

 private:
  // Decides every undecided check in process, scaled to this replica's share of its rule.
  void DecideLocally(RequestPlan& plan, CheckDecisions& decisions);

  const std::string backend_name_;
  LocalFallback local_;
};

}  // namespace sluice
