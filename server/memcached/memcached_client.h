// The client of a fleet of memcached servers, as envoyproxy/ratelimit's memcached backend sees
// one: a list of servers (given, or the targets of a DNS SRV name, looked up again every
// refresh interval), each key on the server gomemcache's placement names (server_placement.h).
// Its shape is the Redis client's (docs/redis-backend.md), on the same parts: `io_threads`
// EventLoops shared by every server, `connections` pipelined connections per server spread over
// them (memcached_connection.h), one circuit breaker and one call-latency histogram per server.
//
//   auto client = MemcachedClient::Create(options, RealClock::Get());
//   std::vector<MemcachedOp> ops = {{key, commands, 1}};
//   (*client)->Execute(std::move(ops), clock.MonotonicMicros() + 10000,
//                      [](absl::Status status, std::vector<MetaReply> replies) { ... });
//
// Execute splits the operations by server, writes each server's as one pipelined batch on one
// of its connections (posted to that connection's loop), and calls back once, when every
// server has answered: with every reply in operation order, or with the first failure (the
// other servers' commands have run: a caller that must undo them does so itself). A server's
// failures carry their FailureReason; its breaker fails its batches at once while open and
// probes it with `mn` (the breaker's rules are the Redis client's, circuit_breaker.h).
//
// SRV: the first lookup is made by Create (an error fails it, as upstream panics then); later
// ones on a thread of the client's own. A new list keeps the servers still in it (their
// connections) and connects the new ones; a server that left is closed a refresh interval later,
// when no call can still reach it. Keys then live where the new list places them, as upstream's.
//
// Thread-safety: every method is safe from any thread; callbacks run on I/O threads (or inline
// after Stop) and must not block. Stop and the destructor must not run on an I/O thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/common/metric_histogram.h"
#include "server/common/mutex.h"
#include "server/common/snapshot_publisher.h"
#include "server/memcached/memcached_connection.h"
#include "server/memcached/meta_protocol.h"
#include "server/memcached/srv_resolver.h"
#include "server/redis/backoff.h"
#include "server/redis/circuit_breaker.h"
#include "server/redis/event_loop.h"
#include "server/redis/node_metrics.h"
#include "server/redis/tls_options.h"

namespace sluice {

struct MemcachedClientOptions {
  // HOST:PORT or unix:PATH of each server, in placement order. Not with `srv`.
  std::vector<std::string> servers{};
  // _service._proto.name: the servers are its SRV targets (sorted), looked up at Create and
  // then every `srv_refresh` (zero: never again).
  std::string srv{};
  absl::Duration srv_refresh = absl::ZeroDuration();
  int io_threads = 1;
  int connections = 2;  // per server
  RedisTlsOptions tls{};
  absl::Duration connect_timeout = absl::Seconds(1);
  absl::Duration backoff_min = absl::Milliseconds(20);
  absl::Duration backoff_max = absl::Seconds(2);
  absl::Duration stall_timeout = absl::Seconds(3);
  absl::Duration queue_grace = absl::Milliseconds(1);
  // Per connection: a batch that would put more commands than this on the wire (written, their
  // replies not read yet) fails at once, kUnavailable. Not a flag: a bound, small in tests.
  size_t max_pending_commands = 65536;
  // The breaker of each server (circuit_breaker.h); 0 failures: no breaker.
  int breaker_failures = 5;
  absl::Duration breaker_open = absl::Seconds(1);
  absl::Duration breaker_open_min = absl::Milliseconds(50);
  // The decision budget: the probe's deadline, and the least length of a streak that opens.
  absl::Duration breaker_budget = absl::Milliseconds(10);
};

// One command for the server that holds `key` (placement).
struct MemcachedOp {
  std::string key;
  std::string command;  // one encoded meta command (meta_protocol.h)
};

struct MemcachedClientResources {
  // The SRV lookups; default: DnsSrvResolver with the system's resolver.
  std::shared_ptr<SrvResolver> resolver{};
  RandomFn random{};
};

class MemcachedClient {
 public:
  using Done = absl::AnyInvocable<void(absl::Status, std::vector<MetaReply>) &&>;

  // Validates `options`, looks the SRV name up (if any), starts the loops and begins
  // connecting; does not wait for the servers (WaitUntilReady). kInvalidArgument for bad
  // options; kUnavailable naming the SRV name when its first lookup fails, kResourceExhausted
  // when it names more than kMaxSrvTargets targets.
  static absl::StatusOr<std::unique_ptr<MemcachedClient>> Create(
      MemcachedClientOptions options, const Clock& clock, MemcachedClientResources resources = {});
  ~MemcachedClient();
  MemcachedClient(const MemcachedClient&) = delete;
  MemcachedClient& operator=(const MemcachedClient&) = delete;

  // Runs every operation on its server; see the file comment. Never blocks; `done` runs once, on
  // an I/O thread (inline, before Execute returns, only after Stop or for no operations).
  void Execute(std::vector<MemcachedOp> ops, int64_t deadline_monotonic_us, Done done);

  // Blocks until every server has a connection up, or `timeout` passes; true if so. Start-up
  // and tests only; REQUIRES: not on an I/O thread.
  bool WaitUntilReady(absl::Duration timeout);
  // Servers with a connection up now, and servers in the list.
  int ready_servers() const;
  int servers() const;
  // The current list, in placement order.
  std::vector<std::string> server_addresses() const;
  void CollectNodeMetrics(std::vector<NodeMetrics>* out) const;
  // SRV lookups made after the first, and those that failed or were not taken (over
  // kMaxSrvTargets, an unusable target): the list then stays.
  uint64_t srv_refreshes() const { return srv_refreshes_.load(std::memory_order_relaxed); }
  uint64_t srv_failures() const { return srv_failures_.load(std::memory_order_relaxed); }
  // Looks the SRV name up now and applies the answer (the refresh thread's work; tests).
  absl::Status RefreshServers();

  // Closes every connection (batches out fail with kUnavailable; later Executes fail inline)
  // and stops the loops and the refresh thread. Blocks; idempotent.
  void Stop();

 private:
  class Node;
  // A list of servers in placement order; what Execute reads.
  struct Placement {
    std::vector<std::shared_ptr<Node>> nodes;
    // Each server once, in the order it first appears in `nodes` (an address listed twice is
    // one node, weighing twice); owned by `nodes`.
    std::vector<Node*> unique_nodes;
  };

  MemcachedClient(MemcachedClientOptions options, const Clock& clock,
                  MemcachedClientResources resources);
  absl::Status Start();
  // The SRV name's targets, if they can be the list: at most kMaxSrvTargets (else
  // kResourceExhausted naming both), each a server address.
  absl::StatusOr<std::vector<std::string>> LookupServers();
  // The nodes for `addresses`, reusing the current ones' by address. Starts the new ones.
  absl::StatusOr<std::shared_ptr<const Placement>> MakePlacement(
      const std::vector<std::string>& addresses);
  std::shared_ptr<const Placement> placement() const { return placement_.Load(); }
  void RefreshLoop();

  const MemcachedClientOptions options_;
  const Clock& clock_;
  MemcachedClientResources resources_;
  std::shared_ptr<TlsClientContext> tls_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::atomic<uint64_t> next_loop_{0};
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> executing_{0};
  std::atomic<uint64_t> srv_refreshes_{0};
  std::atomic<uint64_t> srv_failures_{0};

  // Read on every Execute with no lock. Each reading thread keeps the last list it read (see
  // snapshot_publisher.h) until it reads again, so a node's use_count does not say whether a call
  // can still reach it: nodes that left are stopped a refresh interval later (RefreshLoop).
  SnapshotPublisher<Placement> placement_;
  mutable Mutex mu_;
  CondVar changed_;
  // Nodes that left the list, stopped and dropped by the next round of RefreshLoop (or by Stop).
  std::vector<std::shared_ptr<Node>> retired_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread refresher_;
};

}  // namespace sluice
