// Decisions executed atomically in Redis by the Lua scripts of lua/, so that any number of
// Sluice replicas sharing one Redis (standalone, or a Redis Cluster) enforce each limit once,
// globally.
//
// Evaluate plans the request's Redis calls (call_plan.h: a limit of 0 decided locally, the
// lone fixed window as INCRBY + PEXPIRE NX, or with upstream's key layout as upstream's INCRBY +
// EXPIRE on upstream's key, a group as one group-script call, lone checks of one
// algorithm sharing a script call), sends the request's own calls as one pipelined batch and
// its lane checks to their lanes (lanes.h, standalone only; checks that a free lane would send
// at once go in the request's own batch as that lane's call), and merges the replies into one
// answer. The wire forms are in script_codec.h, the scripts in script_set.h, the decision clock
// in redis_clock.h.
// With leases on (RedisBackendOptions::leases), a request whose every check a hot key's lease
// covers is decided here, without Redis (lease_table.h); the lease calls are ordinary script
// calls of the check's own algorithm, and the give-backs ordinary refunds.
// Every call has the per-decision budget as its deadline (a lane call: the earliest of its
// checks'); past it the caller gets kDeadlineExceeded and applies its failure policy, and the
// late replies are dropped by the client. NOSCRIPT and reconnects are healed in the Redis
// client. On a cluster the batch is split per node and sent in parallel, one pipelined write
// per node; MOVED, ASK and TRYAGAIN are healed in the cluster client. A group's keys share a
// hash tag, so its one script call stays on one node.
//
// Thread-safe: Evaluate may be called from any thread; callbacks run on Redis I/O threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backend/backend.h"
#include "server/backend/call_plan.h"
#include "server/backend/lanes.h"
#include "server/backend/lease_table.h"
#include "server/backend/redis_clock.h"
#include "server/backend/script_set.h"
#include "server/common/clock.h"
#include "server/key/upstream_key.h"
#include "server/redis/cluster/cluster_client.h"
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
  // false (default): decisions use Redis' clock, one clock for every replica: this process's
  // monotonic clock plus an offset sampled with TIME every `clock_sync_interval`, which never
  // steps back (redis_clock.h). true: this process's wall clock as it is; replicas must agree
  // (NTP).
  bool use_caller_clock = false;
  absl::Duration clock_sync_interval = absl::Seconds(1);
  // Standalone Redis: the most lone checks of one algorithm that one script call decides (see
  // "Lanes" below); 1 sends every request's checks on their own. Ignored on a cluster.
  size_t max_batch = 16;
  // How lone fixed windows are named (--redis_key_layout). KeyLayout::kUpstream keeps them in
  // envoyproxy/ratelimit's keys, made from storage keys of prefix `key_prefix`, with upstream's
  // arithmetic (INCRBY, then EXPIRE of the unit plus a random jitter in [0,
  // expiration_jitter) whole seconds), so that upstream's replicas on this Redis share them.
  KeyLayout key_layout = KeyLayout::kSluice;
  std::string key_prefix;
  absl::Duration expiration_jitter = absl::ZeroDuration();
  // Leases of hot keys' units (lease_table.h); off unless leases.hot_rate > 0.
  LeaseOptions leases;
};

class RedisBackend final : public Backend {
 public:
  // Registers the embedded scripts and starts connecting; does not wait for Redis (see
  // WaitUntilReady). `clock` must outlive the backend.
  static absl::StatusOr<std::unique_ptr<RedisBackend>> Create(RedisBackendOptions options,
                                                              const Clock& clock);

  // Stops the client first (see Stop).
  ~RedisBackend() override;

  using Backend::Evaluate;
  void Evaluate(absl::Span<const LimitCheck> checks, const TraceParent& trace,
                EvaluateCallback done) override;
  absl::string_view Name() const override {
    return options_.cluster ? "redis_cluster" : "redis";
  }
  bool Ready() const override { return client_->ready_connections() > 0; }
  // With Redis' clock: the offset in use and the samples so far. With lanes: the calls each
  // lane sent and the checks they carried (their ratio is the mean batch).
  void AppendMetrics(std::string* out) const override;

  // ---- The admin API (Backend::Inspect, Reset) and the reset log.
  // Inspect reads, in one pipelined batch (on a cluster each command goes to its key's node),
  // every key each check's rule uses now: a string state's value (GET) or a sliding window
  // log's newest kMaxInspectedLogEntries members (ZRANGE ... WITHSCORES, and ZCARD), and its
  // TTL (PTTL). A fixed window's key is its window's: Sluice's (AppendFixedWindowKey) and, with
  // upstream's key layout, upstream's too (AppendUpstreamWindowKey), the one PlanCalls has this
  // request read first. Reset deletes every such key (DEL). Both have the admin budget,
  // kAdminTimeout or the decision budget if longer; `done` runs on a Redis thread.
  static constexpr absl::Duration kAdminTimeout = absl::Seconds(1);
  static constexpr size_t kMaxInspectedLogEntries = 16384;
  void Inspect(absl::Span<const LimitCheck> checks, InspectCallback done) override;
  void Reset(absl::Span<const LimitCheck> checks, ResetCallback done) override;
  // The reset log is one stream, ResetLogKey(key_prefix) (server/key/reset_log_key.h), trimmed
  // to its last kResetLogEntries entries: XADD one entry per storage key ("k" <key>), or for a
  // key longer than kMaxLoggedKeyBytes an entry that makes every reader forget everything
  // ("all"), so that the log holds at most about kResetLogEntries x kMaxLoggedKeyBytes. A
  // reader starts with an entry of its own ("start", whose id is its cursor) and then reads
  // from its cursor (XRANGE <cursor> +): the cursor's own entry first means nothing was lost;
  // any other first entry means the log was trimmed past it (more than kResetLogEntries - 1
  // resets since its last read) or lost (a flushed or failed-over Redis), and the page says so.
  // A stream is one key: it works alike on a standalone Redis, behind Sentinel and on a
  // cluster, each command atomic. Redis 5.0 or later.
  static constexpr size_t kResetLogEntries = 1024;
  static constexpr size_t kMaxLoggedKeyBytes = 4096;
  bool SharesResets() const override { return true; }
  void PublishResets(absl::Span<const std::string> storage_keys, PublishCallback done) override;
  void ReadResets(const std::string& cursor, ResetLogCallback done) override;

  // Start-up only: blocks until the connections are up (and, with Redis' clock, its offset is
  // sampled) or `timeout` passes.
  bool WaitUntilReady(absl::Duration timeout);

  // The time decisions are made at: microseconds since the Unix epoch on Redis' clock (see
  // RedisBackendOptions::use_caller_clock).
  int64_t NowMicros();
  RedisClockSamples clock_samples() const;
  // Closes the connections; pending batches complete with kUnavailable. Blocks; idempotent.
  void Stop() { client_->Stop(); }

  // Quota streams across replicas (server/quota/): writes `replica`'s demands for each bucket
  // hash key in `keys` (demands[i] for keys[i], requests a second) and reads the other
  // replicas' written within `ttl_ms` of now (Redis' own clock, TIME), in one call of the
  // rlqs_exchange script. `done` gets, per key, the other replicas' demands, or the error; it
  // runs once, on a Redis thread. One call is one script run in Redis: keep it small
  // (kQuotaExchangeBatch keys) so that decisions queued behind it wait little.
  // REQUIRES: keys.size() == demands.size() >= 1, every key of one hash tag.
  static constexpr size_t kQuotaExchangeBatch = 100;
  using QuotaExchangeCallback =
      absl::AnyInvocable<void(absl::StatusOr<std::vector<std::vector<double>>>) &&>;
  void ExchangeQuotaDemand(const std::string& replica, absl::Span<const std::string> keys,
                           absl::Span<const std::vector<double>> demands, int64_t ttl_ms,
                           absl::Duration timeout, QuotaExchangeCallback done);

 private:
  RedisBackend(RedisBackendOptions options, const Clock& clock,
               std::unique_ptr<RedisExecutor> client, ScriptSet scripts);

  // Evaluate after the leases: plans the checks' Redis calls and sends them.
  void EvaluateInRedis(absl::Span<const LimitCheck> checks, int64_t now, const TraceParent& trace,
                       EvaluateCallback done);
  // Sends the lease calls and give-backs LeaseTable::Admit named (callbacks on Redis threads).
  void SendLeaseCalls(std::vector<LeaseAsk> asks, std::vector<LeaseReturn> returns);
  // The commands of the request's own calls, in plan order.
  CommandBatch EncodeCalls(absl::Span<const LimitCheck> checks, int64_t now,
                           absl::Span<const PlannedCall> calls);
  // Reads the replies of the request's own batch into decisions[check index].
  absl::Status DecodeReplies(absl::Span<const PlannedCall> calls, int64_t now,
                             absl::Span<RedisReply> replies, absl::Span<Decision> decisions);
  // Queues the lane checks of `plan`, one algorithm at a time so that a request's checks of
  // one algorithm travel together, and sends what may leave.
  void QueueInLanes(absl::Span<const LimitCheck> checks, absl::Span<const uint32_t> lane_checks,
                    const std::shared_ptr<SplitRequest>& request, int64_t now,
                    int64_t deadline);
  // Sends one lane call; its return sends what may leave the lane then.
  void SendLaneCall(Algorithm algorithm, LaneCall call);
  // Moves the lane checks of each algorithm whose lane would let them leave at once anyway
  // (Lanes::TryTakeCall) into the request's own batch, as one call of that algorithm's script.
  // Returns the algorithms so taken, bit (1 << algorithm), whose lanes the batch's return
  // must report (ReturnLanes).
  uint32_t TakeFreeLanes(absl::Span<const LimitCheck> checks, CallPlan& plan);
  // Reports the return of the lane calls taken by TakeFreeLanes and sends what may leave.
  void ReturnLanes(uint32_t algorithms);
  // Upstream's key layout: whole seconds added to a window key's TTL, uniform in [0,
  // expiration_jitter), as upstream's JitterRand.Int63n.
  int64_t ExpirationJitter() const;
  // Returns a denied lone fixed window's hits to its window key (fire and forget).
  void GiveBack(const std::string& window_key, uint64_t hits);
  // The keys each check's state lives in on this Redis at `now` (StateReport::keys without
  // what was read), the one the request's decisions read first.
  std::vector<std::vector<StoredKey>> KeysOf(absl::Span<const LimitCheck> checks,
                                             int64_t now) const;
  // The deadline of an admin API call.
  int64_t AdminDeadline() const;

  const RedisBackendOptions options_;
  const Clock& clock_;
  const bool use_lanes_;  // standalone and max_batch > 1
  const ScriptSet scripts_;
  // Declared before client_, whose destruction (after Stop) must find them alive.
  Lanes lanes_;
  LeaseTable leases_;
  std::unique_ptr<RedisExecutor> client_;
  RedisClock redis_clock_;
};

}  // namespace sluice
