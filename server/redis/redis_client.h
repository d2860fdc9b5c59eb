// The asynchronous, pipelined client of one Redis server (standalone, or one node of a
// cluster). Callers hand it a CommandBatch with a deadline and return at once; the batch's
// callback runs later on an I/O thread with all replies in order, or with an error status.
//
//   auto client = RedisClient::Create({.address = "127.0.0.1:6379"}, RealClock::Get());
//   const RedisScript* script = *(*client)->RegisterScript("token_bucket", source);
//   CommandBatch batch;
//   batch.AddEvalSha(*script, {key}, {"10", "1"});
//   (*client)->Execute(std::move(batch), clock.MonotonicMicros() + 10000,
//                      [](absl::Status status, absl::Span<RedisReply> replies) { ... });
//
// Shape: `io_threads` EventLoops, each owning `connections_per_thread` RedisConnections. Execute
// picks a ready connection round-robin. If that connection is idle, the calling thread writes
// the batch to the socket itself (`caller_write_horizon`) and the loop wakes only for the
// replies; otherwise it pushes the batch onto the connection's lock-free queue, and the first
// push of a burst wakes the loop, which writes the whole burst in one go (pipelining comes from
// batching, never from waiting). Transient trouble never blocks a caller: a batch with no
// ready connection fails at once with kUnavailable, one without replies in time fails at its
// deadline with kDeadlineExceeded (its late replies are dropped), NOSCRIPT is healed inside.
//
// For a cluster layer: the client knows nothing of slots. MOVED/ASK/TRYAGAIN come back as error
// replies in the batch; a cluster client keeps one RedisClient per node address, all sharing
// one set of loops and one ScriptCache (RedisClientResources), and re-sends commands with
// CommandBatch::AddFrom / AddFormatted. A batch goes out back-to-back on one connection, so
// [ASKING, command] stays a pair. RedisClusterClient (cluster_client.h) is that layer; both
// implement RedisExecutor, the interface the backend holds.
//
// Thread-safety: every method is safe from any thread. Callbacks run on the client's I/O
// threads (or, after Stop, inline on the caller's stack) and must not block; they may call
// Execute. Stop and the destructor must not be called from a callback.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/common/mutex.h"
#include "server/redis/backoff.h"
#include "server/redis/command_batch.h"
#include "server/redis/circuit_breaker.h"
#include "server/redis/connection.h"
#include "server/redis/event_loop.h"
#include "server/redis/redis_executor.h"
#include "server/redis/reply.h"
#include "server/redis/script_cache.h"
#include "server/redis/sentinel.h"
#include "server/redis/sentinel_options.h"
#include "server/redis/tls_context.h"
#include "server/redis/tls_options.h"

namespace sluice {

struct RedisClientOptions {
  // "host:port", "[ipv6]:port", or "unix:/path/to/redis.sock" (a unix domain socket). A host
  // name is resolved at every connect, on the I/O thread.
  std::string address{};
  // AUTH: `password` alone for requirepass, `username` and `password` for an ACL user.
  std::string username{};
  std::string password{};
  int db = 0;
  // TLS to the server (every node of a cluster alike; the sentinels too); off by default.
  RedisTlsOptions tls{};
  // With sentinel.addresses: `address` is ignored; the master is whichever the sentinels name
  // for sentinel.master, followed through failovers.
  RedisSentinelOptions sentinel{};
  // Ignored when RedisClientResources::loops is given.
  int io_threads = 1;
  int connections_per_thread = 1;
  // TCP connect plus AUTH/SELECT/SCRIPT LOAD/PING.
  absl::Duration connect_timeout = absl::Seconds(1);
  // Reconnect delays: doubling from min to max, each jittered into the upper half of its step.
  absl::Duration backoff_min = absl::Milliseconds(20);
  absl::Duration backoff_max = absl::Seconds(2);
  // A connection with commands outstanding that reads nothing for this long is dropped and
  // reconnected (hung server, silent network loss). Zero disables.
  absl::Duration stall_timeout = absl::Seconds(3);
  // Per connection: a batch that would exceed this many commands on the wire fails fast.
  size_t max_pending_commands = 65536;
  // A batch Executed on an idle connection is written by the calling thread itself when its
  // deadline is at least this far off (see connection.h); zero: the I/O thread writes them all.
  absl::Duration caller_write_horizon = absl::Milliseconds(2);
  // Time a batch waits inside this process (for an I/O thread; in the backend, in a lane)
  // before it is written is not charged to its deadline, up to this much per wait: a short
  // wait leaves Redis the whole budget, a long one costs at most the grace more.
  absl::Duration queue_grace = absl::Milliseconds(1);
  // After this many batches in a row fail for the node's fault (timeout, connection), batches
  // fail at once (FailureReason::kCircuitOpen) until a probe of the client's own succeeds:
  // the first goes breaker_open_min after opening, each failed one doubles the wait, up to
  // breaker_open (circuit_breaker.h). A threshold of 0 disables the breaker.
  int breaker_failures = 5;
  absl::Duration breaker_open = absl::Seconds(1);
  absl::Duration breaker_open_min = absl::Milliseconds(50);
  // The decision budget, for the breaker: its probe (a PING) gets this long, so a node slower
  // than decisions allow stays open, and a streak of failures opens it only once the streak has
  // lasted this long. The Redis backend sets it to its timeout.
  absl::Duration breaker_budget = absl::Milliseconds(10);
};

// Collaborators several clients may share, e.g. the per-node clients of a cluster client.
// Every field is optional.
struct RedisClientResources {
  // Run the connections on these loops (connections_per_thread on each) instead of starting
  // io_threads loops of the client's own. They must keep running until the client is destroyed.
  std::vector<EventLoop*> loops{};
  // Scripts to load on connect and to heal NOSCRIPT with; default: a cache of the client's own.
  std::shared_ptr<ScriptCache> scripts{};
  // Jitter for reconnect delays; called on I/O threads, possibly concurrently.
  // Default: DefaultRandom().
  RandomFn random{};
  // With RedisClientOptions::tls enabled: the TLS context to connect with (one for all nodes of
  // a cluster, which then re-read changed files once); default: one of the client's own.
  std::shared_ptr<TlsClientContext> tls{};
  // Told, on an I/O thread, whenever one of the client's connections is lost (false) or ready
  // (true): the cluster client looks for a failover when a node drops. Must not block.
  std::function<void(bool ready)> on_ready_change{};
};

// Totals over the client's connections; see RedisConnectionStats.
struct RedisClientStats {
  int connections = 0;
  int ready_connections = 0;
  RedisConnectionStats totals;
  bool breaker_open = false;
  uint64_t breaker_opens = 0;     // times the breaker opened
  uint64_t breaker_rejected = 0;  // batches failed at once while it was open
};

class RedisClient : public RedisExecutor {
 public:
  // Validates `options`, starts the loops and begins connecting; returns without waiting for
  // Redis (see WaitUntilReady). kInvalidArgument for bad options. `clock` (whose
  // MonotonicMicros deadlines are measured in) must outlive the client.
  static absl::StatusOr<std::unique_ptr<RedisClient>> Create(RedisClientOptions options,
                                                             const Clock& clock,
                                                             RedisClientResources resources = {});

  // Stop()s, then releases the connections and the client's own loops.
  ~RedisClient() override;

  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Sends every command of `batch`, pipelined, on one connection. Never blocks. `done` runs
  // exactly once, on an I/O thread:
  //   OK                 with one reply per command, in order (Redis errors such as WRONGTYPE,
  //                      MOVED or ASK are error replies; NOSCRIPT never is);
  //   kUnavailable       at once if no connection is ready, or when the connection is lost,
  //                      or when too many commands are in flight;
  //   kDeadlineExceeded  when `deadline_monotonic_us` (clock.MonotonicMicros()) passes first;
  //                      replies that come later are dropped;
  //   kInternal          if Redis refuses to load a script the batch runs (SCRIPT LOAD error).
  // After Stop, `done` runs inline, before Execute returns, with kUnavailable.
  // A batch must not contain commands that change the connection's mode or state for later
  // batches (SUBSCRIBE, MONITOR, SELECT, blocking commands such as BLPOP).
  void Execute(CommandBatch batch, int64_t deadline_monotonic_us, BatchCallback done) override;
  void CollectNodeMetrics(std::vector<NodeMetrics>* out) const override;

  // Registers a Lua script for EVALSHA (see ScriptCache::Register). Connections up already
  // load it on first use; later connections load it during their handshake.
  absl::StatusOr<const RedisScript*> RegisterScript(std::string_view name,
                                                    std::string_view source) override;
  ScriptCache& scripts() const { return *scripts_; }

  // Blocks until every connection is ready, up to `timeout`; true if they are. For start-up
  // and tests, never for a request path. REQUIRES: not on an I/O thread.
  bool WaitUntilReady(absl::Duration timeout) override;

  // Connections ready right now.
  int ready_connections() const override;
  RedisClientStats stats() const;

  // Closes every connection (pending batches complete with kUnavailable) and stops the
  // client's own loops; later Executes fail inline. Blocks until done; idempotent.
  // REQUIRES: not on one of the client's I/O threads.
  void Stop() override;

  const std::string& address() const { return options_.address; }
  const RedisClientOptions& options() const { return options_; }

  // For a node the topology has just named a master: connections waiting out a reconnect
  // backoff connect now, and the breaker forgets the failures it saw (they may be a dead
  // predecessor's, or this node's while it was down). Any thread but the client's I/O threads.
  void Refresh();
  // Ends the node's failure window without a success: its keys are now served elsewhere.
  void CloseFailureWindow() { breaker_.CloseFailureWindow(); }
  // Whether the node is unusable now: no connection ready, or the breaker open.
  bool unusable() const { return ready_connections() == 0 || breaker_.open(); }
  // Under Sentinel: sluice_redis_topology_changes_total (masters the sentinels named after the
  // first).
  void AppendClientMetrics(std::string* out) const override;

 private:
  RedisClient(RedisClientOptions options, const Clock& clock);

  absl::Status Start(RedisClientResources resources, RedisConnectionOptions connection_options);
  RedisConnection* Pick();
  // The (non-null) connections of loops_[loop_index].
  std::vector<std::unique_ptr<RedisConnection>*> ConnectionsOn(size_t loop_index);
  void OnReadyChange(bool ready);
  // Points every connection at `master` (the sentinels' answer), on their loops.
  void Retarget(const RedisEndpoint& master);
  // On loops_[0] when the breaker's probe may be due: sends it, or waits until it is due.
  void OnProbeTimer();
  // Runs `work(i)` for each loop i on that loop's thread (inline if the loop is not running)
  // and waits for all of them.
  void RunOnEachLoop(const std::function<void(size_t loop_index)>& work);

  const RedisClientOptions options_;
  const Clock& clock_;
  std::shared_ptr<ScriptCache> scripts_;
  MetricHistogram call_latency_;  // the node's, shared by its connections
  CircuitBreaker breaker_;  // the node's; every connection records its batches' outcomes
  // Fires the breaker's probe; lives on loops_[0] (created, armed and destroyed there).
  std::unique_ptr<LoopTimer> probe_timer_;
  std::vector<std::unique_ptr<EventLoop>> owned_loops_;
  std::vector<EventLoop*> loops_;
  // connections_[loop * connections_per_thread + k] lives on loops_[loop]. Fixed after Create;
  // each is created, closed and destroyed on its loop's thread.
  std::vector<std::unique_ptr<RedisConnection>> connections_;
  std::atomic<uint64_t> next_connection_{0};
  // Under Sentinel: finds the master and follows it; created after the connections, stopped
  // first by Stop.
  std::unique_ptr<SentinelWatcher> sentinel_;
  // Execute calls between their stopped_ check and the end of their push; Stop waits for them
  // to drain so that nothing reaches a connection after it is closed.
  std::atomic<int64_t> executing_{0};
  std::atomic<bool> stopped_{false};
  std::function<void(bool ready)> on_ready_change_;
  // Under Sentinel: masters named after the first (the watcher's thread writes).
  std::atomic<uint64_t> topology_changes_{0};
  bool have_master_ = false;  // the watcher's thread's

  mutable Mutex mu_;
  CondVar changed_;  // ready_count_ or stop_done_ changed
  int ready_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sluice
