// Test helper: a real Redis Sentinel deployment of child processes on free 127.0.0.1 ports: one
// master, one replica of it, and (by default) three sentinels monitoring it, each in a
// temporary directory of its own (the sentinels rewrite their sentinel.conf there). Sentinels
// are `redis-server <conf> --sentinel`, the same executable as Debian's redis-sentinel. Their
// down-after-milliseconds is short (1 s by default) so that a killed master fails over in about
// two seconds, and their INFO and hello periods are shortened (see the options).
//
// Besides start-up it offers what tests of a Sentinel client need to provoke one: the master's
// address as the sentinels name it, killing the master and waiting for the sentinels to promote
// the replica, a failover without a crash (SENTINEL FAILOVER), bringing the killed master back,
// and a blocking Command on any sentinel. master() and replica() follow the failovers the
// helper waits for: after WaitForFailover, master() is the promoted server.
//
// With RedisSentinelDeploymentOptions::tls the master, the replica and the sentinels all serve
// TLS on ports of their own, and talk to each other over TLS only (tls-replication yes on all
// five: replication, sentinel to server and sentinel to sentinel). The sentinels then monitor
// the master's TLS port, and everything they report is a TLS address: get-master-addr-by-name,
// the replica they discover through the master (it announces its TLS port), the sentinels they
// discover through hello messages, +switch-master. Every process keeps its plain port too, for
// the helper's own commands; a client under test should be given SentinelAddresses().
//
// Timing, measured on 2 cores with Redis 7.0.15, TLS or not, with the default options: Start
// takes 0.6 to 0.75 s; a killed master's failover (KillMaster to WaitForFailover's return) 1.6
// to 3.1 s, mostly 2 to 2.7 s (down_after_ms, up to a ping period of 1 s, the vote, SLAVEOF NO
// ONE, the promotion confirmed by INFO); ForceFailover 0.6 s. With Redis' own INFO and hello
// periods (10 s and 2 s) Start takes 2.2 s (sentinels find each other by hellos), a failover
// the same, ForceFailover 1.2 s, and WaitUntilReplicaSynced after RestartOldMaster 20 s.
//
// What Redis does with a master that comes back after a failover (RestartOldMaster): without
// persistence and with no replicaof in its configuration it starts as an empty master and
// answers ROLE "master". The sentinels, which now list it as a replica of the new master, demote
// it (REPLICAOF the new master and CONFIG REWRITE, "+convert-to-slave" in the log of the
// sentinel that does it) at the first INFO that finds it has reported that role for 4 hello
// periods: 2.1 s after the restart with the default options. It then resyncs in full from the
// new master, and WaitUntilReplicaSynced returns 5 s after the restart (the sentinels must also
// see its link up in an INFO). Until the demotion it is a second, empty master that no sentinel
// names. ForceFailover leaves the old master running as a master just the same, taking writes
// that its full resync will then drop, for 2.5 s; WaitUntilReplicaSynced returns 3.7 s after
// ForceFailover began.
//
// Not thread-safe: one thread drives a deployment object.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/support/redis_server.h"

namespace sluice::testing {

struct RedisSentinelDeploymentOptions {
  // `sentinel monitor <master_name> ...`: the name clients ask the sentinels about.
  std::string master_name = "mymaster";
  // How many sentinels; at least `quorum`.
  int sentinels = 3;
  // How many sentinels must agree that the master is down before a failover begins.
  int quorum = 2;
  // sentinel down-after-milliseconds: how long a silent master takes to be declared down.
  int down_after_ms = 1000;
  // sentinel failover-timeout: among others, how long a failover may take before another
  // sentinel tries, and twice that before the same master is failed over again.
  int failover_timeout_ms = 3000;
  // SENTINEL DEBUG info-period and publish-period, set on every sentinel as it starts (they
  // are not configuration: a sentinel restarted through sentinel(i)->Restart() is back at
  // Redis' defaults, 10000 and 2000 ms). Shorter than Redis' defaults so that the sentinels
  // notice changes sooner: how often a sentinel sends INFO to a healthy server (it learns a
  // replica's role and link from it), and sends its hello (sentinels find each other by them,
  // and demote a master that returns after a failover 4 publish periods after its INFO says
  // so). They do not change how soon a dead master is noticed (down_after_ms, and pings every
  // second) or what the sentinels publish.
  int info_period_ms = 1000;
  int publish_period_ms = 500;
  // requirepass and masterauth on the master and the replica (either may be master), and
  // `sentinel auth-pass` on the sentinels. Empty: none.
  std::string master_password{};
  // requirepass on the sentinels themselves, for clients and for each other (Redis 7.0
  // sentinels authenticate to other sentinels with their own requirepass). Empty: none.
  std::string sentinel_password{};
  // TLS on all five processes with these files and client_auth; tls.port and tls.plain_port
  // are ignored (every process gets a free TLS port and keeps its plain one). tls.ca_file is
  // required: the processes verify each other with it. Off by default.
  RedisServerTlsOptions tls{};
  // For the whole start-up.
  std::chrono::milliseconds start_timeout{60000};
};

class RedisSentinelDeployment {
 public:
  // Starts the master, the replica and the sentinels, and waits until every sentinel knows the
  // master, the replica (as a healthy replica: ready to be promoted) and all other sentinels
  // (and is connected to them), and the replica has synced: see WaitUntilReplicaSynced.
  // kInvalidArgument for impossible options; otherwise the error
  // says what did not come up or converge.
  static absl::StatusOr<std::unique_ptr<RedisSentinelDeployment>> Start(
      RedisSentinelDeploymentOptions options = {});

  // Stops every process.
  ~RedisSentinelDeployment();
  RedisSentinelDeployment(const RedisSentinelDeployment&) = delete;
  RedisSentinelDeployment& operator=(const RedisSentinelDeployment&) = delete;

  const std::string& master_name() const { return options_.master_name; }

  // The server that is master, as of the last failover this helper waited for (the first
  // server until then; killed or not). Owned by the deployment.
  RedisServer* master() const { return servers_[master_index_].get(); }
  // The other server.
  RedisServer* replica() const { return servers_[1 - master_index_].get(); }
  // The address sentinels use and report for `server` (a server or a sentinel): its TLS
  // address under TLS, else its plain one.
  std::string MonitoredAddress(const RedisServer& server) const;

  size_t sentinel_count() const { return sentinels_.size(); }
  // Sentinel `index`, e.g. to Kill or Pause it. REQUIRES: index < sentinel_count().
  RedisServer* sentinel(size_t index) const { return sentinels_[index].get(); }
  // "127.0.0.1:<port>" of sentinel `index`'s plain port (which it keeps under TLS too).
  std::string SentinelAddress(size_t index) const;
  // "127.0.0.1:<tls port>" of sentinel `index`; "" without TLS.
  std::string SentinelTlsAddress(size_t index) const;
  // The sentinels' addresses a client should be given: the TLS ones under TLS, else the plain.
  std::vector<std::string> SentinelAddresses() const;

  // Runs one command on sentinel `index` (its plain port, with the sentinel password); see
  // RedisServer::Command. kOutOfRange when there is no such sentinel.
  absl::StatusOr<std::string> SentinelCommand(
      size_t index, const std::vector<std::string>& args,
      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // `SENTINEL get-master-addr-by-name` on sentinel `index`, as "<ip>:<port>". kNotFound when
  // the sentinel knows no such master.
  absl::StatusOr<std::string> MasterAddressAsSeenBy(size_t index);
  // The master address every live sentinel names; kUnavailable when they disagree (the message
  // says who names what) or none is alive.
  absl::StatusOr<std::string> MasterAddressAsSentinelsSee();

  // SIGKILLs master(), like a crash. The sentinels fail over after down_after_ms and a vote.
  void KillMaster();
  // Waits until every live sentinel names replica() as the master and replica() answers ROLE
  // "master"; then master() and replica() swap. kDeadlineExceeded (with what was seen last)
  // when that does not happen in time.
  absl::Status WaitForFailover(std::chrono::milliseconds timeout);
  // Asks a live sentinel for a failover without a crash (SENTINEL FAILOVER), then
  // WaitForFailover. The old master keeps running: see the top of this file for when it
  // becomes a replica again (WaitUntilReplicaSynced waits for that). An error reply (e.g.
  // NOGOODSLAVE, INPROG) is returned as kUnknown with its text.
  absl::Status ForceFailover(std::chrono::milliseconds timeout);
  // Restarts the server KillMaster killed, on its ports, and returns once it answers PING; it
  // then runs as an empty master until the sentinels demote it (see the top of this file).
  // REQUIRES: WaitForFailover has returned OK since KillMaster (else it is still master() and
  // comes back as the master the sentinels know). kFailedPrecondition when nothing was killed
  // or it was restarted already.
  absl::Status RestartOldMaster();
  // Waits until the deployment has settled as Start leaves it: replica() is a replica of
  // master() with its link up, and every live sentinel names master() (flags "master"), is
  // connected to every other live sentinel, and lists replica() as a healthy replica (flags
  // "slave", master-link-status ok: what SENTINEL FAILOVER needs). For use after
  // RestartOldMaster and after ForceFailover.
  absl::Status WaitUntilReplicaSynced(std::chrono::milliseconds timeout);

 private:
  explicit RedisSentinelDeployment(RedisSentinelDeploymentOptions options);
  absl::Status Launch();
  // Why the deployment is not settled yet (see WaitUntilReplicaSynced), or OK.
  absl::Status CheckSettled();
  absl::Status CheckFailedOver();
  // Live sentinels' indexes.
  std::vector<size_t> LiveSentinels();

  RedisSentinelDeploymentOptions options_;
  // The two servers, in start order; servers_[master_index_] is master().
  std::unique_ptr<RedisServer> servers_[2];
  size_t master_index_ = 0;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
  // What KillMaster killed and RestartOldMaster has not restarted yet.
  RedisServer* killed_ = nullptr;
};

}  // namespace sluice::testing
