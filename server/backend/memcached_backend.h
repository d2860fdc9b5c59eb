// Fixed windows kept in memcached, as envoyproxy/ratelimit keeps them there, so that any number
// of Sluice replicas sharing the servers enforce each limit once, and replicas of upstream and
// Sluice sharing them during a migration count each window in one counter.
//
// A check is one meta command on the server that holds its window's key (upstream's key,
// server/key/upstream_key.h; upstream's placement, server/memcached/server_placement.h):
//   - hits > 0: `ma` increment-or-create with the window's TTL, one atomic step, and the
//     decision made here from the count it returns, as the Redis backend decides a lone fixed
//     window from INCRBY (FixedWindowDecision). Where upstream reads the count first and
//     increments afterwards in the background (so replicas racing on one key all read the same
//     count and all admit), this admits exactly: the count each request sees includes every
//     increment before it. A denied request's hits are given back right after (`ma MD`,
//     floored at 0), unless its rule charges always (upstream's increment-first, the default
//     under upstream's variables); until then they count against concurrent requests, erring
//     towards denial.
//   - hits == 0: `mg`, the count as it is.
//   - a refund (is_negative_hits): `ma MD` by the hits, floored at 0 by memcached, a missing
//     key left missing, the TTL kept: upstream's memcached path (its Decrement), answered as
//     FixedWindowRefundDecision.
// A group (the rules of one descriptor, co-located descriptors) is every check's command in one
// Evaluate; when any check denies, the others give their hits back (but for a rule that charges
// always), so the group consumes all or nothing, with the same transient error as above.
// A limit of 0 is decided here without a command. Any other algorithm is refused at config load
// (ValidateOptions::fixed_windows_only); one that reaches Evaluate anyway fails it with
// FailureReason::kArgument (decided in process, never by the failure policy).
//
// Decisions are made on this process's clock (windows are epoch-aligned, as upstream's):
// replicas must agree on time, as upstream's do. Every call has the per-decision budget as its
// deadline; the client's failures (timeouts, connections, breakers) carry their FailureReason
// and the caller applies its failure policy.
//
// Thread-safe: Evaluate may be called from any thread; callbacks run on the client's threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backend/backend.h"
#include "server/common/clock.h"
#include "server/memcached/memcached_client.h"

namespace sluice {

struct MemcachedBackendOptions {
  MemcachedClientOptions client;
  // Per-decision budget, from Evaluate to the last reply.
  absl::Duration timeout = absl::Milliseconds(10);
  // The storage keys' prefix (--redis_key_prefix), which starts upstream's keys too.
  std::string key_prefix = "sluice:";
};

class MemcachedBackend final : public Backend {
  struct Call;

 public:
  // Starts the client (looking an SRV name up first); does not wait for the servers.
  static absl::StatusOr<std::unique_ptr<MemcachedBackend>> Create(
      MemcachedBackendOptions options, const Clock& clock,
      MemcachedClientResources resources = {});
  ~MemcachedBackend() override;

  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                EvaluateCallback done) override;
  absl::string_view Name() const override { return "memcached"; }
  // Some server has a connection up (as a cluster is ready with some master up).
  bool Ready() const override { return client_->ready_servers() > 0; }
  // sluice_memcached_* per server, the servers in the list, and the SRV refreshes.
  void AppendMetrics(std::string* out) const override;

  // The admin API: each check's window key of now (WindowKey, role "upstream_window"), read
  // with its TTL (`mg <key> v t`) or deleted (`md <key>`), on the server that holds it, within
  // kAdminTimeout or the decision budget if longer; `done` runs on a client thread. A rule of
  // another algorithm fails it with kInvalidArgument. There is no reset log: other replicas'
  // over-limit caches keep their entries until their retry time.
  static constexpr absl::Duration kAdminTimeout = absl::Seconds(1);
  void Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) override;
  void Reset(absl::Span<const LimitCheck> checks, ResetCallback done) override;

  // Start-up only: blocks until every server has a connection up, or `timeout` passes.
  bool WaitUntilReady(absl::Duration timeout) { return client_->WaitUntilReady(timeout); }
  // Closes the connections; calls out complete with kUnavailable. Blocks; idempotent.
  void Stop() { client_->Stop(); }
  MemcachedClient& client() { return *client_; }

  // The memcached key of `check`'s window at `now_us`: upstream's key, or, when memcached cannot
  // take that one (longer than 250 bytes, a space or a control byte: upstream cannot count
  // such a descriptor at all), "<prefix>#<SHA-1 of upstream's key in hex>". Empty when the
  // storage key is not one of this prefix.
  static std::string WindowKey(absl::string_view storage_key, absl::string_view prefix,
                               const LimitParams& params, int64_t now_us);

 private:
  MemcachedBackend(MemcachedBackendOptions options, const Clock& clock,
                   std::unique_ptr<MemcachedClient> client);
  // The memcached keys of `checks` at now_us (the admin API), or kInvalidArgument.
  absl::StatusOr<std::vector<std::string>> AdminKeys(absl::Span<const LimitCheck> checks,
                                                     int64_t now_us) const;
  int64_t AdminDeadline() const;
  // Decides the checks of `call` from the replies and gives back what must be given back.
  void Finish(std::shared_ptr<Call> call, absl::Status status, std::vector<MetaReply> replies);

  const MemcachedBackendOptions options_;
  const Clock& clock_;
  std::unique_ptr<MemcachedClient> client_;
};

}  // namespace sluice
