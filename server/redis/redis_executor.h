// What the layers above Redis need from a Redis client, whether it talks to one server
// (RedisClient) or to a Redis Cluster (RedisClusterClient): run a batch of commands
// asynchronously against a deadline, register Lua scripts for EVALSHA, and report readiness.
// A backend holds a RedisExecutor and does not care which of the two it got; everything that
// makes a cluster different (slots, MOVED/ASK/TRYAGAIN, failover, NOSCRIPT) is healed below
// this interface.
//
// Thread-safety: implementations are safe for concurrent use from any thread. Callbacks run on
// the implementation's own threads and must not block; they may call Execute. Stop, WaitUntilReady
// and the destructor must not be called from a callback.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/redis/command_batch.h"
#include "server/redis/node_metrics.h"
#include "server/redis/script_cache.h"

namespace sluice {

class RedisExecutor {
 public:
  virtual ~RedisExecutor() = default;

  // Runs every command of `batch` and calls `done` exactly once: OK with one reply per command
  // in command order (a command Redis refused for a real reason, e.g. WRONGTYPE or a script's
  // error, is an error reply there), or with an error status and no replies:
  //   kUnavailable       Redis (or the node that owns a command's slot) cannot be reached, or
  //                      the client is stopped;
  //   kDeadlineExceeded  `deadline_monotonic_us` (the client's Clock::MonotonicMicros) passed
  //                      first; replies that come later are dropped. The budget is Redis':
  //                      time the batch waits for a client thread before it is written moves
  //                      the deadline by as much, up to the client's queue grace; a batch
  //                      still unwritten at the deadline so moved fails unsent.
  // A failure carries its FailureReason (server/common/failure_reason.h).
  // Never blocks. `done` runs on one of the client's threads, except after Stop, when it may run
  // inline on the caller's stack.
  virtual void Execute(CommandBatch batch, int64_t deadline_monotonic_us, BatchCallback done) = 0;

  // Registers a Lua script for CommandBatch::AddEvalSha; the script lives as long as the client.
  // Same (name, source) again returns the same script; see ScriptCache::Register.
  virtual absl::StatusOr<const RedisScript*> RegisterScript(std::string_view name,
                                                            std::string_view source) = 0;

  // Blocks until the client can serve every command (all connections up; for a cluster, the
  // slot map known and every master connected), up to `timeout`; true if so. For start-up and
  // tests only. REQUIRES: not on one of the client's threads.
  virtual bool WaitUntilReady(absl::Duration timeout) = 0;

  // Connections ready right now (for a cluster: to the masters of the current slot map); a
  // readiness probe serves traffic while this is positive.
  virtual int ready_connections() const = 0;

  // Appends what /metrics says of each node this client talks to (see node_metrics.h).
  virtual void CollectNodeMetrics(std::vector<NodeMetrics>* out) const = 0;
  // Appends what /metrics says of the client as a whole, in the Prometheus text format (a
  // cluster's redirections, retries and topology refreshes). Default: nothing.
  virtual void AppendClientMetrics(std::string* /*out*/) const {}

  // Closes every connection; pending batches complete with kUnavailable and later Executes fail
  // inline. Blocks until done; idempotent. REQUIRES: not on one of the client's threads.
  virtual void Stop() = 0;
};

}  // namespace sluice
