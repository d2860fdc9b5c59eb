// One connection to one memcached server, owned by one EventLoop: it connects (TCP or a unix
// socket, TLS when asked: Sluice's own socket and OpenSSL session, server/redis/socket.h),
// pipelines the batches handed to it (each batch's commands written together, replies matched
// in order), completes each batch when its last reply arrives or its deadline passes, and
// reconnects with jittered exponential backoff after any failure. memcached has no handshake of
// its own: the connection is ready once TCP (and TLS) is.
//
// Deadlines, the stall watch, the connect timeout and the reconnect are this class's timers. A
// batch past its deadline completes with kDeadlineExceeded at once (timeout_in_flight if the
// server has said nothing since it was written, timeout_slow if it answered others); its
// replies are read and dropped when they come, so the order holds. A connection with commands
// out and nothing read for the stall timeout is dropped. Every batch's outcome goes to the
// node's circuit breaker and its call latency to the node's histogram.
//
// Threading: everything, from construction to destruction, runs on the loop thread (the node
// posts each batch there), except ready() and stats(), which any thread may read. Batch
// callbacks run on the loop thread, never inline in Dispatch's caller's frame before Dispatch
// has queued the batch, and must not block.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "server/common/clock.h"
#include "server/common/metric_histogram.h"
#include "server/memcached/meta_protocol.h"
#include "server/redis/backoff.h"
#include "server/redis/circuit_breaker.h"
#include "server/redis/event_loop.h"
#include "server/redis/socket.h"
#include "server/redis/tls_context.h"

struct event;

namespace sluice {

// The commands of one batch for one server, and who waits for their replies.
struct MemcachedBatch {
  // Callback: OK with one reply per command in order, or a failure (with its FailureReason)
  // and no replies.
  using Done = absl::AnyInvocable<void(absl::Status, std::vector<MetaReply>&&) &&>;

  std::string commands;  // encoded (meta_protocol.h)
  size_t count = 0;      // commands in `commands`, so replies awaited
  int64_t deadline_us = 0;   // Clock::MonotonicMicros
  int64_t submitted_us = 0;  // when the node took it (monotonic)
  Done done;
};
using MemcachedBatchPtr = std::unique_ptr<MemcachedBatch>;

struct MemcachedConnectionOptions {
  RedisEndpoint endpoint{};  // host:port or a unix socket
  std::shared_ptr<TlsClientContext> tls{};  // TLS over TCP when set
  int64_t connect_timeout_us = 1'000'000;
  int64_t backoff_min_us = 20'000;
  int64_t backoff_max_us = 2'000'000;
  int64_t stall_timeout_us = 3'000'000;  // 0: no stall watch
  // Batches that would put more commands than this on the wire fail at once (kUnavailable).
  size_t max_pending_commands = 65536;
  // Time a batch waited for the loop before it is written moves its deadline, up to this.
  int64_t queue_grace_us = 1000;
};

struct MemcachedConnectionStats {
  uint64_t connects = 0;
  uint64_t timeouts = 0;
};

class MemcachedConnection {
 public:
  // `breaker` and `call_latency` may be null; otherwise they outlive the connection.
  // `on_ready_change(ready)` runs on the loop thread whenever readiness flips.
  MemcachedConnection(EventLoop& loop, MemcachedConnectionOptions options, const Clock& clock,
                      RandomFn random, CircuitBreaker* breaker, MetricHistogram* call_latency,
                      absl::AnyInvocable<void(bool ready)> on_ready_change);
  // Close()s. REQUIRES: on the loop thread, or the loop is not running.
  ~MemcachedConnection();
  MemcachedConnection(const MemcachedConnection&) = delete;
  MemcachedConnection& operator=(const MemcachedConnection&) = delete;

  // Starts connecting. REQUIRES: on the loop thread; once.
  void Start();
  // Writes `batch`, or fails it at once (not connected: kUnavailable; its deadline already
  // past once the queue grace is counted: timeout_before_send; too many commands out).
  // REQUIRES: on the loop thread.
  void Dispatch(MemcachedBatchPtr batch);
  // Stops for good: every batch out fails with kUnavailable, later Dispatches too.
  // REQUIRES: on the loop thread, or the loop is not running.
  void Close();

  bool ready() const { return ready_.load(std::memory_order_acquire); }
  MemcachedConnectionStats stats() const;

 private:
  enum class State { kIdle, kConnecting, kHandshaking, kReady, kDown, kClosed };
  struct InFlight {
    MemcachedBatchPtr batch;
    std::vector<MetaReply> replies;
    size_t remaining = 0;
    uint64_t replies_seen_at_send = 0;
    bool completed = false;
  };

  static void OnReadable(int fd, short events, void* arg);
  static void OnWritable(int fd, short events, void* arg);

  void StartConnect();
  void ContinueConnect();
  void BecomeReady();
  void HandleRead();
  void HandleWrite();
  // Writes what the socket takes now; false (and the connection dropped) on an error.
  bool Flush();
  void SetWriteWatched(bool watched);
  // Closes the socket, fails every batch out, and reconnects after the backoff (unless
  // closed). `tls`: the failure was TLS' own.
  void Drop(const std::string& reason, bool tls);
  void ReleaseSocket();
  void SetReady(bool ready);
  void Complete(InFlight& entry, absl::Status status);
  void ArmDeadline(int64_t deadline_us);
  void OnDeadline();
  void OnStallCheck();
  absl::Status LostStatus() const;
  static void Bump(std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  EventLoop& loop_;
  const MemcachedConnectionOptions options_;
  const Clock& clock_;
  CircuitBreaker* const breaker_;
  MetricHistogram* const call_latency_;
  absl::AnyInvocable<void(bool)> on_ready_change_;
  const std::string address_;

  State state_ = State::kIdle;
  int fd_ = -1;
  std::unique_ptr<Stream> stream_;
  event* read_event_ = nullptr;
  event* write_event_ = nullptr;
  bool write_watched_ = false;
  bool write_waits_for_read_ = false;  // TLS
  bool read_waits_for_write_ = false;  // TLS
  std::string out_;
  size_t out_sent_ = 0;
  MetaReplyReader reader_;
  std::deque<InFlight> in_flight_;
  size_t outstanding_ = 0;  // commands written whose reply has not come
  uint64_t replies_seen_ = 0;
  uint64_t replies_at_stall_check_ = 0;
  std::string last_error_;
  bool last_failure_tls_ = false;  // the last failure was TLS' own
  ExponentialBackoff backoff_;
  LoopTimer connect_timer_;
  LoopTimer reconnect_timer_;
  LoopTimer deadline_timer_;
  int64_t deadline_timer_at_ = 0;
  LoopTimer stall_timer_;

  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> timeouts_{0};
};

}  // namespace sluice
