// The asynchronous client of a Redis Cluster, with RedisClient's calling shape (both are
// RedisExecutors): callers hand it a CommandBatch with a deadline and return at once; the
// callback runs later with every reply in command order, or with an error status.
//
//   auto client = RedisClusterClient::Create(
//       {.seeds = {"10.0.0.1:6379", "10.0.0.2:6379"}, .node = {.password = "..."}}, clock);
//   const RedisScript* script = *(*client)->RegisterScript("token_bucket", source);
//   CommandBatch batch;
//   batch.AddEvalSha(*script, {"rl:{tenant-a}"}, {"10", "1"});
//   batch.AddEvalSha(*script, {"rl:{tenant-b}"}, {"10", "1"});  // may live on another master
//   (*client)->Execute(std::move(batch), clock.MonotonicMicros() + 10000, callback);
//
// Shape. One RedisClient per master, all running on one set of `io_threads` EventLoops and
// sharing one ScriptCache (so every node loads every script, and heals NOSCRIPT per connection).
// Node clients are created by the topology thread as slot maps name new masters, and live until
// the cluster client is destroyed. Routing reads an immutable snapshot {SlotMap, node clients}
// published through a SnapshotPublisher: the request path takes no lock.
//
// Execute: each command's slot is HashSlot of its routing key (CommandBatch records it at Add
// time; keyless commands go round-robin to the masters). The commands are grouped by master into
// one sub-batch per node, sent in parallel (one pipelined write per node), and their replies are
// merged back into the original order; the callback runs exactly once, when the last command has
// its final reply or at the first failure.
//
// Healing, per command, within the batch's deadline:
//   MOVED s addr    the slot map is patched at once (slot s -> addr, a new snapshot), a full
//                   refresh is requested, and the command is resent to addr;
//   ASK s addr      [ASKING, command] is sent to addr as one back-to-back pair; the map is kept;
//   TRYAGAIN, CLUSTERDOWN, LOADING/MASTERDOWN/READONLY, a lost or refused node connection
//                   the command is re-routed with the newest map after a few milliseconds of
//                   jittered backoff (and, except for TRYAGAIN, a map refresh is requested);
//   NOSCRIPT        healed inside RedisClient, per connection.
// A command that runs out of redirects (max_redirects) or retries (max_retries), or whose next
// retry would fall past the deadline, fails the batch with kUnavailable; a reply that does not
// come in time fails it with kDeadlineExceeded. Other Redis errors (WRONGTYPE, OOM, a script's
// error) are the command's reply, as with RedisClient.
//
// Topology: a dedicated thread fetches CLUSTER SLOTS (own blocking connection, see
// SlotMapLoader) from the masters it can reach, then the seeds, then every other node the last
// map named (nodes it cannot reach last), at start, every `refresh_interval`, and when asked
// (MOVED). Requests arriving while one is pending or within `min_refresh_gap` of the last
// refresh are coalesced into one.
// While a node is in trouble (a master of the map has no ready connection or an open breaker,
// or in the last second a node's connection was lost, a batch failed on a node, or a node
// answered CLUSTERDOWN), the map is re-read every `outage_refresh_interval`, jittered into
// [0.75, 1.25] of it, whether requests come or not and however many come: an idle process
// follows a failover as soon as a busy one, and a process pays at most a few CLUSTER SLOTS a
// second while a node is down, none once all are up. One event brings a refresh forward to
// `min_refresh_gap` even then: a node answering a command after it answered CLUSTERDOWN (the
// cluster is whole again, so a failover has just completed). A failover thus shows up as: commands to
// the dead master fail fast (no ready connection, then its breaker), and within one outage
// interval of the cluster promoting the replica the refreshed map routes its slots to it. A
// node a new map makes master (a promoted replica, or a former master back from the dead) has
// its connections made or re-made at once and its breaker closed before the map is used, so
// the first command routed to it goes to it; the nodes that left the map end their failure
// windows (sluice_redis_node_failure_window_seconds).
//
// Limitation: a multi-key command is routed by its first key only; Redis answers CROSSSLOT if
// its keys span slots (use hash tags). MULTI/EXEC is not supported (the commands of a batch may
// go to different nodes). Node clients of masters that left the cluster are kept (reconnecting
// with backoff) until the client is destroyed.
//
// Thread-safety: every public method is safe from any thread. Callbacks run on the client's
// I/O threads or its retry thread (or, after Stop, inline on the caller's stack) and must not
// block; they may call Execute. Stop, WaitUntilReady and the destructor must not be called from
// a callback.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/common/failure_reason.h"
#include "server/common/mutex.h"
#include "server/redis/backoff.h"
#include "server/redis/command_batch.h"
#include "server/redis/cluster/delay_queue.h"
#include "server/redis/event_loop.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_executor.h"
#include "server/redis/script_cache.h"
#include "server/redis/cluster/slot_map.h"
#include "server/redis/cluster/slot_map_loader.h"
#include "server/common/snapshot_publisher.h"

namespace sluice {

struct RedisClusterClientOptions {
  // "host:port" of one or more cluster nodes, of any role; the rest of the cluster is learned
  // from them. REQUIRES: not empty.
  std::vector<std::string> seeds{};
  // Settings for the connections to every node: credentials, connect timeout, reconnect
  // backoff, stall timeout, io_threads (loops shared by all nodes) and connections_per_thread
  // (per node, on each loop). `address` is ignored; `db` must be 0 (Redis Cluster has only db 0).
  // connect_timeout also bounds each step of a topology refresh.
  RedisClientOptions node{};
  // Period of the full topology refresh that runs whatever happens.
  absl::Duration refresh_interval = absl::Seconds(10);
  // Refreshes that MOVED asks for are at least this far apart.
  absl::Duration min_refresh_gap = absl::Milliseconds(100);
  // The period of refreshes while a node is in trouble (see the header comment), jittered.
  absl::Duration outage_refresh_interval = absl::Milliseconds(200);
  // MOVED/ASK redirections one command may follow.
  int max_redirects = 5;
  // Delayed re-routes one command may take (TRYAGAIN, CLUSTERDOWN, lost node, ...).
  int max_retries = 8;
  // Their delays: doubling from min to max, each jittered into the upper half of its step.
  absl::Duration retry_backoff_min = absl::Milliseconds(2);
  absl::Duration retry_backoff_max = absl::Milliseconds(100);
  // Scripts every node's connections load on connect and heal NOSCRIPT with; default: a cache
  // of the client's own (RegisterScript adds to it either way).
  std::shared_ptr<ScriptCache> scripts{};
};

// Cumulative counters (relaxed; for tests and metrics) and a few current values.
struct RedisClusterClientStats {
  uint64_t moved = 0;             // MOVED replies followed
  uint64_t ask = 0;               // ASK replies followed
  uint64_t try_again = 0;         // TRYAGAIN replies retried
  uint64_t cluster_down = 0;      // CLUSTERDOWN (and LOADING, MASTERDOWN, READONLY) retried
  uint64_t node_failures = 0;     // sub-batches that failed with kUnavailable and were retried
  uint64_t retries = 0;           // commands re-routed after a backoff
  uint64_t slot_patches = 0;      // snapshots published by MOVED
  uint64_t refreshes = 0;         // successful topology refreshes
  uint64_t refresh_failures = 0;  // refreshes that reached no node
  uint64_t failed_batches = 0;    // batches completed with an error status
  uint64_t topology_changes = 0;  // maps published that moved a slot or changed the masters
  int nodes = 0;                  // node clients created so far
  int masters = 0;                // masters in the current slot map
  int ready_connections = 0;      // to those masters
  // Summed over every node client's connections (NOSCRIPT heals, reconnects, deadlines...).
  RedisConnectionStats connections;
};

class RedisClusterClient : public RedisExecutor {
 public:
  // Validates `options`, starts the loops, the retry thread and the topology thread (whose
  // first refresh begins at once) and returns without waiting for Redis (see WaitUntilReady).
  // kInvalidArgument for bad options. `clock` must outlive the client. `random` jitters retry
  // and reconnect delays (called from several threads at once); default DefaultRandom().
  static absl::StatusOr<std::unique_ptr<RedisClusterClient>> Create(
      RedisClusterClientOptions options, const Clock& clock, RandomFn random = nullptr);

  // Stop()s, then releases the node clients and the loops.
  ~RedisClusterClient() override;

  RedisClusterClient(const RedisClusterClient&) = delete;
  RedisClusterClient& operator=(const RedisClusterClient&) = delete;

  // See RedisExecutor::Execute and the header comment. Never blocks. Until the first slot map
  // is known, batches fail with kUnavailable. `done` runs on an I/O or retry thread, never
  // inline, except after Stop.
  void Execute(CommandBatch batch, int64_t deadline_monotonic_us, BatchCallback done) override;

  absl::StatusOr<const RedisScript*> RegisterScript(std::string_view name,
                                                    std::string_view source) override;
  ScriptCache& scripts() const { return *scripts_; }

  // Blocks until a slot map is known and every connection to each of its masters is ready, up
  // to `timeout`. REQUIRES: not on one of the client's threads.
  bool WaitUntilReady(absl::Duration timeout) override;

  // Ready connections to the masters of the current slot map; 0 before the first map.
  int ready_connections() const override;

  // Stops the topology thread (waiting for a refresh in progress, at most about
  // node.connect_timeout per step), fails batches waiting for a retry, closes every node
  // connection (pending batches complete with kUnavailable) and stops the loops. Blocks;
  // idempotent. REQUIRES: not on one of the client's threads.
  void Stop() override;

  // The current slot map, or nullptr before the first refresh. Any thread.
  std::shared_ptr<const SlotMap> slot_map() const;

  // Asks the topology thread for a full refresh (coalesced with pending ones). Any thread.
  void RequestRefresh();

  RedisClusterClientStats stats() const;
  // Each node's breaker (the nodes this client has connected to).
  void CollectNodeMetrics(std::vector<NodeMetrics>* out) const override;
  // sluice_redis_cluster_redirections_total{kind}, _retries_total{cause}, _refreshes_total{result}
  // and _masters.
  void AppendClientMetrics(std::string* out) const override;
  const RedisClusterClientOptions& options() const { return options_; }

 private:
  struct Routing;
  struct Batch;
  struct CommandState;
  struct SubBatch;
  struct Sent;

  RedisClusterClient(RedisClusterClientOptions options, const Clock& clock, RandomFn random,
                     std::shared_ptr<TlsClientContext> tls);

  absl::Status Start();

  // Routes and sends `commands` (indices into batch->commands); used for the first send and
  // for every resend. Fails the batch if a command's slot has no master.
  void Dispatch(const std::shared_ptr<Batch>& batch, const std::vector<uint32_t>& commands);
  void Send(const std::shared_ptr<Batch>& batch, RedisClient* client, SubBatch sub);
  void OnReplies(const std::shared_ptr<Batch>& batch, RedisClient* client, std::vector<Sent>& sent,
                 absl::Status status, absl::Span<RedisReply> replies);
  // Re-routes `commands` after a backoff, or fails the batch if out of retries or budget, with
  // `why` in its message and `reason` attached.
  void RetryLater(const std::shared_ptr<Batch>& batch, std::vector<uint32_t> commands,
                  std::string_view why, FailureReason reason);
  // Completes the batch with `status` unless it has completed already.
  void Fail(const std::shared_ptr<Batch>& batch, absl::Status status);
  void Succeed(const std::shared_ptr<Batch>& batch);

  // The client of the node at `address`, or nullptr if none was created yet.
  RedisClient* FindClient(std::string_view address) const;
  // Applies a MOVED: publishes a snapshot with `slot` served by `address`, if that node has a
  // client. Any thread.
  void PatchSlot(int slot, const std::string& address);
  // Asks the topology thread to create a client for `address` (a MOVED/ASK target no map named
  // yet), and to refresh.
  void RequestNode(const std::string& address);

  // Notes a sign that a node is in trouble (see the header comment) and asks for a refresh.
  // Any thread.
  void NoteTrouble();
  // Whether a node is in trouble now. Topology thread; takes node clients' locks.
  bool InOutage() const;

  // The topology thread.
  void RefreshLoop();
  bool RefreshOnce();
  void Publish(SlotMap map);
  // Creates the client of `address` if there is none. Topology thread only (creation blocks
  // briefly on the loops, so never on an I/O thread).
  RedisClient* EnsureClient(const std::string& address, bool* created);

  static void Bump(std::atomic<uint64_t>& counter) {
    counter.fetch_add(1, std::memory_order_relaxed);
  }

  const RedisClusterClientOptions options_;
  const Clock& clock_;
  const RandomFn random_;
  // With options_.node.tls enabled: every node's connections and the slot map loader's.
  const std::shared_ptr<TlsClientContext> tls_;
  const SlotMapLoader loader_;
  std::shared_ptr<ScriptCache> scripts_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::unique_ptr<DelayQueue> retry_queue_;

  // The routing snapshot; null until the first refresh. Replaced, never edited.
  SnapshotPublisher<Routing> routing_;
  std::atomic<uint64_t> next_keyless_{0};

  // Every node client ever created, by address. Only the topology thread adds; nothing removes
  // until destruction, so a RedisClient* from a snapshot or FindClient stays valid.
  mutable Mutex clients_mu_;
  std::unordered_map<std::string, std::unique_ptr<RedisClient>> clients_
      ABSL_GUARDED_BY(clients_mu_);

  // Topology thread state.
  Mutex refresh_mu_;
  CondVar refresh_wanted_;
  std::atomic<bool> refresh_requested_{false};
  bool refresh_stopping_ ABSL_GUARDED_BY(refresh_mu_) = false;
  std::vector<std::string> wanted_nodes_ ABSL_GUARDED_BY(refresh_mu_);
  std::thread refresh_thread_;

  // Execute calls between their stopped_ check and their last send; Stop waits for them.
  std::atomic<int64_t> executing_{0};
  std::atomic<bool> stopped_{false};

  mutable Mutex mu_;
  CondVar changed_;  // a map was published, or stopping_/stop_done_ changed
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_done_ ABSL_GUARDED_BY(mu_) = false;

  std::atomic<uint64_t> moved_{0};
  std::atomic<uint64_t> ask_{0};
  std::atomic<uint64_t> try_again_{0};
  std::atomic<uint64_t> cluster_down_{0};
  std::atomic<uint64_t> node_failures_{0};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> slot_patches_{0};
  std::atomic<uint64_t> refreshes_{0};
  std::atomic<uint64_t> refresh_failures_{0};
  std::atomic<uint64_t> failed_batches_{0};
  std::atomic<uint64_t> topology_changes_{0};
  // When the last sign of trouble came (monotonic; 0: never).
  std::atomic<int64_t> last_trouble_us_{0};
  // A node answered CLUSTERDOWN since the last command that succeeded.
  std::atomic<bool> cluster_down_seen_{false};
  // A refresh that waits only for min_refresh_gap, even in an outage.
  std::atomic<bool> urgent_refresh_{false};
};

}  // namespace sluice
