// Decisions executed atomically in Redis by the Lua scripts of lua/, so that any number of
// Sluice replicas sharing one Redis (standalone, or a Redis Cluster) enforce each limit once,
// globally.
//
// One Evaluate call is one pipelined batch on one connection: a lone check runs its algorithm's
// single-key script, a group (the rules of one descriptor) runs the "group" script, which
// decides all of its keys all-or-nothing in one atomic call. The batch has one deadline (the
// per-decision budget); past it the caller gets kDeadlineExceeded and applies its failure
// policy, and the late replies are dropped by the client. NOSCRIPT and reconnects are healed in
// the Redis client. On a cluster the batch is split per node and sent in parallel, one
// pipelined write per node; MOVED, ASK and TRYAGAIN are healed in the cluster client. A group's
// keys share a hash tag, so its one script call stays on one node.
//
// Thread-safe: Evaluate may be called from any thread; callbacks run on Redis I/O threads.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backend/backend.h"
#include "server/common/clock.h"
#include "server/redis/cluster_client.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_executor.h"

namespace sluice {

struct RedisBackendOptions {
  // false: one standalone server at client.address. true: a Redis Cluster reached through the
  // seed nodes in `cluster_seeds` (client.address is ignored; client.db must be 0).
  bool cluster = false;
  std::vector<std::string> cluster_seeds;
  // Connection settings (for a cluster: of each node).
  RedisClientOptions client;
  // Per-decision budget, from Evaluate to the last reply.
  absl::Duration timeout = absl::Milliseconds(10);
  // false: the scripts take the time from Redis TIME, one clock for every replica (default).
  // true: the caller's clock is passed in, e.g. for tests or when Redis' clock is not trusted.
  bool use_caller_clock = false;
};

class RedisBackend final : public Backend {
 public:
  // Registers the embedded scripts and starts connecting; does not wait for Redis (see
  // WaitUntilReady). `clock` must outlive the backend.
  static absl::StatusOr<std::unique_ptr<RedisBackend>> Create(RedisBackendOptions options,
                                                              const Clock& clock);

  void Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) override;
  absl::string_view Name() const override { return cluster_ ? "redis_cluster" : "redis"; }
  bool Ready() const override { return client_->ready_connections() > 0; }

  // Start-up only: blocks until the connections are up or `timeout` passes.
  bool WaitUntilReady(absl::Duration timeout) { return client_->WaitUntilReady(timeout); }
  // Closes the connections; pending batches complete with kUnavailable. Blocks; idempotent.
  void Stop() { client_->Stop(); }

 private:
  RedisBackend(RedisBackendOptions options, const Clock& clock,
               std::unique_ptr<RedisExecutor> client);

  const RedisBackendOptions options_;
  const bool cluster_;
  const Clock& clock_;
  std::unique_ptr<RedisExecutor> client_;
  // Indexed by Algorithm.
  std::array<const RedisScript*, 6> single_key_scripts_{};
  const RedisScript* group_script_ = nullptr;
};

}  // namespace sluice
