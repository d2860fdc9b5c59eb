// Test helper: a real Redis Cluster of redis-server child processes on free 127.0.0.1 ports
// (each server also needs port + 10000 free for the cluster bus, which FreePort checks), created
// with `redis-cli --cluster create` and waited for until every node reports cluster_state:ok,
// every replica has synced with its master, and all nodes agree on who serves each slot and on
// which nodes are masters.
// cluster-node-timeout is short (1 s by default) so that a killed master fails over in a few
// seconds.
//
// Besides start-up it offers what cluster tests need to provoke a client: roles and slot owners
// as the cluster sees them, killing a master and waiting for its replica's promotion, migrating
// one slot step by step (so a test can hold it mid-migration for ASK, then finish it for MOVED),
// SCRIPT FLUSH on every node, and a blocking Command on any node.
//
// With RedisClusterOptions::tls every node also listens with TLS on a port of its own, and by
// default the cluster bus and replication go over TLS too (tls-cluster yes, tls-replication yes;
// the bus then listens on the TLS port + 10000). The helper itself keeps to the plain ports
// (redis-cli --cluster create, Command, the health checks), so addresses are plain ones unless
// a method says otherwise; TlsAddressOf maps a node's to its TLS address. What a client of the
// TLS ports sees, observed with Redis 7.0.15 and tls-cluster yes: a node answers CLUSTER SLOTS,
// CLUSTER NODES and MOVED / ASK with the ports of the asking connection's kind, TLS ports to a
// TLS connection and plain ports to a plain one (CLUSTER SHARDS lists both, "port" and
// "tls-port"). With tls-cluster no, every connection gets the plain ports, TLS ones too, and
// CLUSTER SHARDS has no "tls-port": a TLS client cannot learn the TLS ports from the cluster.
// A three-master, three-replica cluster is healthy 2.0 to 2.6 s after Start is called, with TLS
// or without (measured on 2 cores). Until the first write, or for up to 10 s (8.5 s seen), an
// idle new cluster's CLUSTER SLOTS lists only the masters: Redis 7.0 leaves out a replica whose
// replication offset is still 0, and an idle master first moves it with its periodic ping to
// replicas (repl-ping-replica-period, 10 s). After a write to each master, 0.5 s sufficed.
//
// Not thread-safe: one thread drives a cluster object.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/support/redis_server.h"

namespace sluice::testing {

struct RedisClusterOptions {
  int masters = 3;
  int replicas_per_master = 1;
  // cluster-node-timeout: how long a silent node takes to be declared failed.
  int node_timeout_ms = 1000;
  // More redis.conf lines for every node.
  std::vector<std::string> extra_config{};
  // For the whole start-up: servers, cluster create, convergence.
  std::chrono::milliseconds start_timeout{60000};
  // TLS on every node, with these files and client_auth; tls.port and tls.plain_port are
  // ignored (every node gets a free TLS port and keeps its plain one). Off by default.
  RedisServerTlsOptions tls{};
  // With tls.enabled: tls-cluster, the cluster bus over TLS (and MIGRATE too, which
  // MigrateSlotKeys heeds), ...
  bool tls_cluster_bus = true;
  // ... and tls-replication, replicas syncing from their master's TLS port.
  bool tls_replication = true;
};

// One node as the cluster describes it (CLUSTER NODES).
struct ClusterNodeInfo {
  std::string id{};
  std::string address{};  // "127.0.0.1:<port>"
  bool master = false;
  bool failed = false;                       // flagged fail or fail? by the node asked
  std::string master_id{};                   // for a replica
  std::vector<std::pair<int, int>> slots{};  // ranges served, for a master
};

class RedisCluster {
 public:
  // Starts the servers, creates the cluster and waits until it is healthy (see above). The
  // error carries redis-cli's output or what did not converge.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(RedisClusterOptions options = {});

  // Stops every server.
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Every node's address, in start order (masters and replicas alike), for client seeds.
  std::vector<std::string> SeedAddresses() const;
  // Every node's TLS address, in start order; empty without TLS.
  std::vector<std::string> TlsSeedAddresses() const;
  // The TLS address of the node at `address`; "" if there is none.
  std::string TlsAddressOf(const std::string& address) const;
  // The server at `address`, plain or TLS, or nullptr.
  RedisServer* ServerAt(const std::string& address) const;
  size_t size() const { return servers_.size(); }

  // Runs one command on the node at `address` (plain or TLS: either way on a plain connection);
  // see RedisServer::Command.
  absl::StatusOr<std::string> Command(const std::string& address,
                                      const std::vector<std::string>& args);

  // The cluster as the first live node (in start order) sees it.
  absl::StatusOr<std::vector<ClusterNodeInfo>> Nodes();
  // The addresses of the masters that serve slots and are not failed, ordered by their first
  // slot (so Masters()[0] serves slot 0 after a fresh start).
  absl::StatusOr<std::vector<std::string>> Masters();
  // The master serving `slot` as the first live node sees it.
  absl::StatusOr<std::string> MasterForSlot(int slot);
  // CLUSTER KEYSLOT, asked of a live node.
  absl::StatusOr<int> KeySlot(const std::string& key);

  // SIGKILLs the node at `address` (like a crash; no restart). A master's replica is promoted by
  // the cluster after about node_timeout_ms plus the election.
  absl::Status KillNode(const std::string& address);
  // Kills the index-th of Masters(); returns its address.
  absl::StatusOr<std::string> KillMaster(int index);
  // Waits until the cluster is healthy again without `dead_master` (killed with KillNode or
  // KillMaster): every live node reports cluster_state:ok and all agree that a live master
  // serves every slot. Returns the master that now serves the dead master's slots.
  absl::StatusOr<std::string> WaitForPromotion(const std::string& dead_master,
                                               std::chrono::milliseconds timeout);

  // Slot migration, in the steps of the cluster specification:
  // 1. CLUSTER SETSLOT <slot> IMPORTING on `to`, MIGRATING on the current owner. From now on
  //    the owner answers ASK for keys of the slot it does not hold.
  absl::Status BeginSlotMigration(int slot, const std::string& to);
  // 2. MIGRATEs every key of the slot from the owner to `to` (CLUSTER GETKEYSINSLOT, MIGRATE).
  absl::Status MigrateSlotKeys(int slot, const std::string& to);
  // 3. CLUSTER SETSLOT <slot> NODE <to> on `to`, the old owner and every other master; waits
  //    until every live node agrees. From now on the old owner answers MOVED.
  absl::Status FinishSlotMigration(int slot, const std::string& to);
  // All three.
  absl::Status MoveSlot(int slot, const std::string& to);

  // SCRIPT FLUSH on every live node.
  absl::Status ScriptFlushAll();

  // Waits until every live node reports cluster_state:ok, every live replica's link to its
  // master is up, and all live nodes agree on the owner of every slot and on every live node's
  // role.
  absl::Status WaitUntilHealthy(std::chrono::milliseconds timeout);

 private:
  explicit RedisCluster(RedisClusterOptions options) : options_(std::move(options)) {}
  absl::Status Create();
  // Live nodes' addresses, in start order.
  std::vector<std::string> LiveAddresses() const;
  absl::StatusOr<std::vector<ClusterNodeInfo>> NodesAsSeenBy(const std::string& address);
  // Why the cluster is not healthy yet, or OK.
  absl::Status CheckHealthy();

  RedisClusterOptions options_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  // Migrations begun and not finished: slot -> source address.
  std::vector<std::pair<int, std::string>> migrating_;
  // Masters KillNode killed: address -> one slot they served.
  std::vector<std::pair<std::string, int>> killed_slot_;
};

// Parses CLUSTER NODES output. Exposed for tests of the helper itself.
absl::StatusOr<std::vector<ClusterNodeInfo>> ParseClusterNodes(const std::string& text);

}  // namespace sluice::testing
