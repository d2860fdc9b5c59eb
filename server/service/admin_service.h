// The admin API's two operations, apart from any transport (the HTTP server serves them as
// POST /admin/inspect and POST /admin/reset): for a domain and its descriptors, given exactly as
// a ShouldRateLimit request gives them (a descriptor's `limit` override included),
//   Inspect  says which rules each descriptor resolves to (Resolve, as a decision resolves it:
//            the same checks, storage keys and parameters), and for each the store's keys, the
//            state they hold by its fields, what a check of 0 hits would answer now (decided on
//            a copy, nothing written: Backend::Inspect) and this replica's over-limit cache
//            entry (OverLimitCache::Peek);
//   Reset    deletes that state from the store (Backend::Reset: every key the rules use now),
//            forgets this replica's cache entries for the storage keys, and tells the other
//            replicas through the store's reset log (Backend::PublishResets), from which each
//            forgets its own within its poll interval (reset_follower.h). A store without a
//            log (memcached) tells no one: other replicas' entries last until their retry
//            time. Each reset is logged at WARNING (who, domain, descriptors, keys deleted,
//            result), the audit trail.
// A request's hits, hits_addend and is_negative_hits are ignored: nothing here is a decision.
// Thread-safe: the collaborators are, and the service holds no per-call state.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/backend/backend.h"
#include "server/config/config_store.h"
#include "server/service/admin_report.h"
#include "server/service/over_limit_cache.h"
#include "server/service/request_validation.h"
#include "server/service/resolve.h"

namespace sluice {

struct AdminServiceOptions {
  // What one request may hold, as for decisions.
  RequestLimits limits;
  // How descriptors resolve: the decision path's own options (key prefix, default charges,
  // calendar months), so that the keys are the ones decisions use.
  ResolveOptions resolve;
  // How often other replicas read the reset log (ResetFollowerOptions::interval), for the
  // answer's words.
  absl::Duration follow_interval = absl::Seconds(1);
};

class AdminService {
 public:
  using Request = envoy::service::ratelimit::v3::RateLimitRequest;
  // The answer: OK with its report, or the error (kInvalidArgument naming the field,
  // kUnavailable while no config is loaded or the store cannot answer, ...).
  using InspectDone = absl::AnyInvocable<void(absl::StatusOr<InspectReport>) &&>;
  // A reset's report comes back even when the store or the log failed: `report.result` says
  // what failed, and the status is that failure. Only a request that cannot be resolved gets
  // an error without a report (its report is then empty).
  using ResetDone = absl::AnyInvocable<void(absl::Status, ResetReport) &&>;

  // `config`, `backend` and `cache` (optional: null when this replica has no over-limit cache)
  // must outlive the service.
  AdminService(const ConfigStore& config, Backend& backend, OverLimitCache* cache,
               AdminServiceOptions options);

  // `done` runs exactly once, inline or on a backend thread; it must not block. `request` need
  // only live for the call.
  void Inspect(const Request& request, InspectDone done);
  // `who` names the caller in the audit line (its address).
  void Reset(const Request& request, std::string who, ResetDone done);

  // sluice_admin_requests_total{operation, result}.
  void AppendMetrics(std::string* out) const;

 private:
  struct Resolved;  // a request's plan and its reports' skeleton (admin_service.cc)

  // Validates and resolves `request` (its hits and refunds cleared).
  absl::StatusOr<std::unique_ptr<Resolved>> ResolveRequest(const Request& request) const;
  // What the other replicas learn of a reset on this store.
  std::string OtherReplicas() const;
  void Count(bool inspect, bool ok);

  const ConfigStore& config_;
  Backend& backend_;
  OverLimitCache* const cache_;
  const AdminServiceOptions options_;
  // [inspect, reset][ok, failed]
  std::atomic<uint64_t> counts_[2][2] = {};
};

}  // namespace sluice
