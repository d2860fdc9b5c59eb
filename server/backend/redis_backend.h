// Decisions executed atomically in Redis by the Lua scripts of lua/, so that any number of
// Sluice replicas sharing one Redis (standalone, or a Redis Cluster) enforce each limit once,
// globally.
//
// How an Evaluate call's checks travel (the wire forms are in script_codec.h):
//   - A lone fixed window runs as INCRBY + PEXPIRE NX (no script), and a group (the rules of
//     one descriptor) runs the "group" script, which decides all of its keys all-or-nothing in
//     one atomic call. These go in the request's own pipelined batch, on one connection.
//   - A lone check of any other algorithm runs its algorithm's script: the single-key one, or
//     the batch one, which decides several independent checks one after the other in one call,
//     so that Redis pays a call's fixed cost once for them all.
//     Standalone, lanes: each algorithm has a lane. A request's lone checks join their lane's
//     queue together. A full call (max_batch checks) leaves at once; fewer checks leave at once
//     only while the lane has fewer calls out than Redis connections (at least 2), else they
//     wait for company until one returns. Under light load every check leaves at once; under
//     heavy load checks of many requests share calls, having waited at most one call's round
//     trip, and a lane never caps throughput.
//     Cluster: a request's lone checks of one algorithm whose keys share a hash tag (so a slot)
//     share a call, in the request's own batch; requests are not mixed.
// Every call has the per-decision budget as its deadline (a lane call: the earliest of its
// checks'); past it the caller gets kDeadlineExceeded and applies its failure policy, and the
// late replies are dropped by the client. NOSCRIPT and reconnects are healed in the Redis
// client. On a cluster the batch is split per node and sent in parallel, one pipelined write
// per node; MOVED, ASK and TRYAGAIN are healed in the cluster client. A group's keys share a
// hash tag, so its one script call stays on one node.
//
// Thread-safe: Evaluate may be called from any thread; callbacks run on Redis I/O threads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
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
  // false (default): decisions use Redis' clock, one clock for every replica: this process's
  // clock plus an offset sampled with TIME every `clock_sync_interval` (error: half the kept
  // sample's round trip; a sample must finish within `timeout`, and one slower than twice the
  // kept one is skipped unless that is a minute old). Until the first sample, the offset is 0.
  // true: this process's clock as it is; replicas must agree (NTP).
  bool use_caller_clock = false;
  absl::Duration clock_sync_interval = absl::Seconds(1);
  // Standalone Redis: the most lone checks of one algorithm that one script call decides (see
  // "Lanes" below); 1 sends every request's checks on their own. Ignored on a cluster.
  size_t max_batch = 16;
};

// Samples of Redis' clock so far (RedisBackendOptions::use_caller_clock false), for tests and
// metrics.
struct RedisClockSamples {
  uint64_t kept = 0;     // the offset in use comes from the latest of these
  uint64_t skipped = 0;  // round trip over twice the kept sample's
  uint64_t failed = 0;   // no answer within the timeout, or not a TIME reply
};

class RedisBackend final : public Backend {
 public:
  // Registers the embedded scripts and starts connecting; does not wait for Redis (see
  // WaitUntilReady). `clock` must outlive the backend.
  static absl::StatusOr<std::unique_ptr<RedisBackend>> Create(RedisBackendOptions options,
                                                              const Clock& clock);

  // Stops the client first (see Stop).
  ~RedisBackend() override;

  void Evaluate(absl::Span<const LimitCheck> checks, EvaluateCallback done) override;
  absl::string_view Name() const override {
    return options_.cluster ? "redis_cluster" : "redis";
  }
  bool Ready() const override { return client_->ready_connections() > 0; }
  // With Redis' clock: the offset in use and the samples so far. With lanes: the calls each
  // lane sent and the checks they carried (their ratio is the mean batch).
  void AppendMetrics(std::string* out) const override;

  // Start-up only: blocks until the connections are up (and, with Redis' clock, its offset is
  // sampled) or `timeout` passes.
  bool WaitUntilReady(absl::Duration timeout);

  // The time decisions are made at: microseconds since the Unix epoch on Redis' clock (see
  // RedisBackendOptions::use_caller_clock).
  int64_t NowMicros();
  RedisClockSamples clock_samples() const;
  // Closes the connections; pending batches complete with kUnavailable. Blocks; idempotent.
  void Stop() { client_->Stop(); }

 private:
  RedisBackend(RedisBackendOptions options, const Clock& clock,
               std::unique_ptr<RedisExecutor> client);

  // Returns a denied lone fixed window's hits to its window key (fire and forget).
  void GiveBack(const std::string& window_key, uint64_t hits);
  // Samples Redis' clock now if the last sample is older than the interval.
  void MaybeSyncClock();

  const RedisBackendOptions options_;
  const Clock& clock_;
  // Redis' clock minus ours, in microseconds; and when (monotonic) the next sample is due.
  // Declared before client_, whose destruction runs the callbacks that write them.
  std::atomic<int64_t> clock_offset_us_{0};
  std::atomic<int64_t> next_clock_sync_us_{0};
  // The kept sample's round trip, and when (monotonic) it was taken. Written by one sample's
  // callback at a time (samples are a second apart and finish within the timeout).
  std::atomic<int64_t> clock_rtt_us_{0};
  std::atomic<int64_t> clock_sampled_at_us_{0};
  // Incremented (release) after the offset is stored: non-zero means the offset is Redis'.
  std::atomic<uint64_t> clock_samples_kept_{0};
  std::atomic<uint64_t> clock_samples_skipped_{0};
  std::atomic<uint64_t> clock_samples_failed_{0};
  // A request answered in several parts (its own batch, and lane calls): decisions land by
  // check index from whichever thread answers; the last part to finish calls `done`.
  class Request {
   public:
    Request(EvaluateCallback done, size_t checks, size_t parts);
    // One part answered (its decisions already stored, if `status` is OK).
    void Finish(absl::Status status, size_t parts);

    std::vector<Decision> decisions;  // by check index; each written by one part

   private:
    EvaluateCallback done_;
    std::atomic<size_t> outstanding_;
    std::mutex mu_;
    absl::Status status_;  // the first failure; guarded by mu_
  };
  // A lone check waiting in, or sent from, its algorithm's lane.
  struct LaneCheck {
    std::shared_ptr<Request> request;
    uint32_t index = 0;  // in the request's checks
    std::string key;
    LimitParams params;
    uint64_t hits = 0;
    int64_t now_us = 0;
    int64_t deadline_us = 0;  // monotonic
  };
  struct Lane {
    std::mutex mu;
    std::vector<LaneCheck> waiting;  // guarded by mu
    int in_flight = 0;               // calls out; guarded by mu
    // Calls sent and the checks they carried, for /metrics (written under mu, read relaxed).
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> checks{0};
  };
  // How the replies of one part of a request's own batch are read (redis_backend.cc).
  struct Part;

  using LaneCalls = absl::InlinedVector<std::vector<LaneCheck>, 1>;
  // The calls that may leave the lane now, taken from its queue: every full one (max_batch
  // checks), then the rest if the lane has fewer than max_lane_calls_ out. REQUIRES: lane.mu.
  LaneCalls TakeCalls(Lane& lane);
  // Sends `call` (not empty); its answer sends what may leave the lane then.
  void SendLaneCall(Algorithm algorithm, std::vector<LaneCheck> call);
  // Reads the replies of a request's own batch into decisions[order[i]].
  absl::Status DecodeParts(absl::Span<const Part> parts, absl::Span<const uint32_t> order,
                           int64_t now, absl::Span<RedisReply> replies,
                           std::vector<Decision>& decisions);

  // Indexed by Algorithm; declared before client_, whose destruction runs the callbacks that
  // use them.
  std::array<Lane, 6> lanes_;
  const int max_lane_calls_;  // calls out per lane: one per connection, at least 2
  std::unique_ptr<RedisExecutor> client_;
  // Indexed by Algorithm: "<algorithm>" (one key) and "<algorithm>_batch" (several
  // independent keys); none for the fixed window, whose lone checks need no script.
  std::array<const RedisScript*, 6> single_key_scripts_{};
  std::array<const RedisScript*, 6> batch_scripts_{};
  const RedisScript* group_script_ = nullptr;
  const RedisScript* give_back_script_ = nullptr;
};

}  // namespace sluice
