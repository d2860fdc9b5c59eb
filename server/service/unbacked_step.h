// In-flight limits (`algorithm: concurrency`) across backend failures, as two steps of a decision.
// Envoy releases every request it saw through the rate-limit filter when the request ends
// (apply_on_stream_done, Filter::onDestroy in envoyproxy/envoy's
// source/extensions/filters/http/ratelimit/ratelimit.cc), whether Sluice admitted it, denied it,
// or could not decide it. An acquisition the backend decided holds a lease there (one that
// charges always, the default of concurrency, even when denied), which its release gives back.
// One the failure policy answered holds none in the backend, and its release must not reach it:
//   - Record, after a failed backend call: each such acquisition whose lease the backend would
//     have held (charged always, or its group admitted by the answer given) is remembered in
//     UnbackedAcquisitions, with whether the failure_mode local store holds it;
//   - MatchReleases, before the backend: each release first takes its key's unbacked
//     acquisitions out of its hits (those the local store holds are given back to it); the rest,
//     0 or more, goes to the backend as usual, which answers with the key's state.
// UnbackedAcquisitions says what this cannot know (a release through another replica; a call
// that timed out yet was executed). A request that is neither pays nothing: Record runs only
// after a backend failure, MatchReleases only for a plan that releases (RequestPlan::
// releases_leases) while something is recorded.
// Thread-safe: UnbackedAcquisitions and FailurePolicy are.
#pragma once

#include "absl/status/status.h"
#include "server/config/failure_mode.h"
#include "server/service/failure_policy.h"
#include "server/service/request_plan.h"
#include "server/service/unbacked_acquisitions.h"

namespace sluice {

class UnbackedStep {
 public:
  // `acquisitions` and `policy` must outlive the step.
  UnbackedStep(UnbackedAcquisitions& acquisitions, FailurePolicy& policy)
      : acquisitions_(acquisitions), policy_(policy) {}

  // Before the backend: takes each undecided release's share of its key's unbacked acquisitions
  // out of its hits (LimitCheck::hits, possibly down to 0), and gives back to the local store the
  // leases it holds among them. Cheap to skip: call it only when plan.releases_leases and
  // !acquisitions.Empty().
  void MatchReleases(RequestPlan& plan, const CheckDecisions& decisions);

  // After a backend call failed with `status` and FailurePolicy::Apply answered by `policy`:
  // remembers the acquisitions of in-flight limits answered without the backend. Not for a call
  // that timed out while its node was answering others (FailureReason::kTimeoutSlow): the node
  // executes it late, and the lease is there for the release.
  // REQUIRES: !status.ok(); `decisions` as Apply left them.
  void Record(const absl::Status& status, FailureMode policy, const RequestPlan& plan,
              const CheckDecisions& decisions);

 private:
  UnbackedAcquisitions& acquisitions_;
  FailurePolicy& policy_;
};

}  // namespace sluice
