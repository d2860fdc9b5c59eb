// One connection to one Redis server, owned by one EventLoop. It connects (TCP or a unix socket,
// TLS when asked; then AUTH, SELECT, SCRIPT LOAD of every registered script, PING), pipelines the batches handed to
// it, completes each batch when its last reply arrives or its deadline passes, heals NOSCRIPT,
// and reconnects with jittered exponential backoff after any failure.
//
// The socket has no timeouts of its own, so they are this class's own timers: connect timeout, a
// deadline per batch (an expired batch completes with kDeadlineExceeded at once; its late
// replies are dropped when they come) and a stall timeout (commands outstanding and no reply at
// all for that long: the server is hung or the network is gone, so the connection is dropped,
// which fails everything pending with kUnavailable and bounds the memory of late replies).
//
// Writing from the caller. A batch handed to an idle connection (nothing on the wire, nothing
// queued) from a thread other than the loop's is written to the socket by the calling thread
// itself, under the connection's mutex, if the mutex is free at once: the loop thread then wakes
// only for the reply, not also for the command. A busy connection leaves batching to the loop,
// which writes a whole burst in one go. The loop still owns every timer. It gives a batch
// written by a caller its deadline timer the next time it runs, and it guarantees it runs by a
// horizon (`caller_write_horizon_us` after it last ran, kept by a watchdog timer while callers
// write); a batch whose deadline comes before that horizon goes through the loop instead.
//
// The parts: this class is the connection's state machine (connect, handshake, dispatch, replies,
// NOSCRIPT healing, deadlines, stall watch, reconnect). The socket, its events on the loop, its
// TLS and the order of replies are RedisWire's (wire.h), and the horizon that callers' writes
// rely on is WriteHorizon's (write_horizon.h).
//
// Threading: Submit and ready() may be called from any thread. Everything else, and every
// callback this class makes (batch callbacks, the readiness hook), runs on the loop thread.
// Everything the loop thread does here runs under `mu_`, so the wire and the
// counters below are shared only under it (the compiler checks this: ABSL_GUARDED_BY); callbacks
// run with it held, and may Submit (to this connection too: from the loop thread, Submit always
// queues). The exception is the common one: a batch answered by the replies read from the
// socket gets its callback after the read, with `mu_` released, so that a caller whose request
// follows (its thread woken by that callback's answer) finds the connection free and writes
// itself instead of handing its batch to the loop. Destroy the connection on the loop thread, or after the loop has stopped.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "server/common/clock.h"
#include "server/common/metric_histogram.h"
#include "server/common/mutex.h"
#include "server/redis/backoff.h"
#include "server/redis/circuit_breaker.h"
#include "server/redis/command_batch.h"
#include "server/redis/event_loop.h"
#include "server/redis/mpsc_queue.h"
#include "server/redis/script_cache.h"
#include "server/redis/tls_context.h"
#include "server/redis/wire.h"
#include "server/redis/write_horizon.h"

namespace sluice {

struct RedisConnectionOptions {
  std::string host{};  // an IP literal or a name resolved (blocking) at each connect
  int port = 6379;
  // Not empty: connect to this unix domain socket instead of host:port.
  std::string unix_path{};
  // No host and no unix_path: the connection waits for Retarget (the sentinels' answer).
  // The handshake asks the server's ROLE and refuses anything but a master (under Sentinel: a
  // demoted master that comes back is a replica).
  bool require_master = false;
  // TLS over TCP when set (shared by every connection to the target).
  std::shared_ptr<TlsClientContext> tls{};
  // AUTH: `password` alone for requirepass, `username` and `password` for an ACL user.
  std::string username{};
  std::string password{};
  int db = 0;                            // SELECT when not 0
  int64_t connect_timeout_us = 1000000;  // TCP connect plus handshake
  int64_t backoff_min_us = 20000;
  int64_t backoff_max_us = 2000000;
  // Drop the connection when commands are outstanding and nothing at all was read for this
  // long; 0 disables. Detection takes between one and two periods.
  int64_t stall_timeout_us = 3000000;
  // Batches that would put more commands than this on the wire fail fast with kUnavailable.
  size_t max_pending_commands = 65536;
  // How far ahead the loop promises to run again, for batches written by the calling thread
  // (see the class comment); a batch due sooner goes through the loop. 0: callers never write.
  int64_t caller_write_horizon_us = 2000;
  // Time a batch waits for the loop thread before it is written is this process', not Redis':
  // up to this much of it moves the batch's deadline (see Submit).
  int64_t queue_grace_us = 1000;
};

// Cumulative counters, readable from any thread (relaxed; for tests and metrics).
struct RedisConnectionStats {
  uint64_t connects = 0;          // handshakes completed
  uint64_t disconnects = 0;       // ready connections lost or dropped
  uint64_t script_loads = 0;      // SCRIPT LOADs sent to heal NOSCRIPT (not counting handshakes)
  uint64_t noscript_retries = 0;  // EVALSHAs resent after NOSCRIPT
  uint64_t deadline_exceeded = 0;
  uint64_t late_replies = 0;  // replies that arrived after their batch had completed
  uint64_t caller_writes = 0;  // batches written to the socket by the thread that submitted them
  uint64_t tls_failures = 0;   // connects whose TLS handshake failed

  // Field by field, for totals over several connections.
  RedisConnectionStats& operator+=(const RedisConnectionStats& other) {
    connects += other.connects;
    disconnects += other.disconnects;
    script_loads += other.script_loads;
    noscript_retries += other.noscript_retries;
    deadline_exceeded += other.deadline_exceeded;
    late_replies += other.late_replies;
    caller_writes += other.caller_writes;
    tls_failures += other.tls_failures;
    return *this;
  }
};

class RedisConnection : private RedisWire::Owner {
 public:
  enum class State { kIdle, kConnecting, kReady, kDown, kClosed };

  // `loop`, `clock` and everything `scripts` hands out must outlive the connection.
  // `on_ready_change(ready)` runs on the loop thread whenever readiness flips.
  // `breaker` (optional; must outlive the connection) records the outcome of every batch, and
  // `call_latency` (optional; must outlive it too) the time from Submit to the replies (or to
  // the deadline) of every batch answered or timed out.
  RedisConnection(EventLoop& loop, RedisConnectionOptions options, const Clock& clock,
                  std::shared_ptr<const ScriptCache> scripts, RandomFn random,
                  absl::AnyInvocable<void(bool ready)> on_ready_change,
                  CircuitBreaker* breaker = nullptr, MetricHistogram* call_latency = nullptr);
  // Close()s. REQUIRES: on the loop thread, or the loop is not running.
  ~RedisConnection();  // not virtual: RedisWire::Owner is a private interface

  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Starts connecting. REQUIRES: on the loop thread; once.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);

  // Hands a batch to the connection; any thread, never blocks. `done` runs exactly once on the
  // loop thread: with the replies, or kUnavailable at once if the connection is not ready,
  // kDeadlineExceeded at `deadline_us` (Clock::MonotonicMicros), kUnavailable if the
  // connection is lost first. Time the batch waits for the loop thread before it is written
  // moves its deadline by as much, up to `queue_grace_us`; a batch still unwritten at its
  // deadline so moved fails unsent, with FailureReason::kTimeoutBeforeSend. Only if the
  // connection is closed does `done` run inline, on the caller's stack, with kUnavailable.
  void Submit(CommandBatch batch, int64_t deadline_us, BatchCallback done) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops for good: timers off, the wire freed, every pending or queued batch failed
  // with kUnavailable; later Submits fail inline. Idempotent.
  // REQUIRES: on the loop thread, or the loop is not running.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // Connects to `endpoint` from now on: a connection up to another server is dropped (its
  // batches fail with kUnavailable) and the new one is tried at once. A no-op for the endpoint
  // already in use. REQUIRES: on the loop thread.
  void Retarget(const RedisEndpoint& endpoint) ABSL_LOCKS_EXCLUDED(mu_);
  // A connection that is down (waiting out its reconnect backoff) connects now, its backoff
  // reset: the server is known to be wanted again (the topology names it). Otherwise a no-op.
  // REQUIRES: on the loop thread.
  void ReconnectIfDown() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the handshake is done and the connection not known to be lost. Any thread; a hint
  // that may be stale by the time the caller acts on it.
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  RedisConnectionStats stats() const;
  EventLoop& loop() const { return loop_; }

 private:
  struct PendingBatch;
  // What the wire holds (as privdata) for one command on it.
  struct CommandSlot {
    PendingBatch* batch = nullptr;
    uint64_t sent_seq = 0;  // when it was (last) written, in sent_seq_ terms
    int noscript_retries = 0;
  };
  // A batch from Submit until it has completed and the wire holds none of its slots any more;
  // so it outlives its deadline while late replies are still due. Once handed to the loop (or
  // written by a caller), touched only under owner->mu_, which the analysis cannot name here.
  struct PendingBatch {
    RedisConnection* owner = nullptr;
    CommandBatch commands;
    BatchCallback done;
    int64_t deadline_us = 0;
    int64_t submitted_us = 0;  // when Submit took it (clock_'s monotonic time)
    // Inline room for the common batch of one or two commands: no allocation of their own.
    absl::InlinedVector<RedisReply, 2> replies;
    absl::InlinedVector<CommandSlot, 2> slots;  // assigned once; the wire holds their addresses
    // While the loop watches its deadline: its place in the connection's list of such batches.
    bool deadline_watched = false;
    PendingBatch* deadline_prev = nullptr;
    PendingBatch* deadline_next = nullptr;
    size_t remaining = 0;  // replies still missing
    size_t refs = 0;       // slots the wire still holds
    // The connection's replies_seen_ when a command of the batch was last written: at the
    // deadline, more means the node was answering meanwhile (slow, not silent).
    uint64_t replies_seen_at_send = 0;
    bool completed = false;
    // Written by a caller and not yet seen by the loop: in caller_batches_, without a timer.
    bool awaiting_loop = false;
    // Answered by a read whose callbacks run once mu_ is released (answered_): freed there.
    bool answer_pending = false;
    bool send_failed = false;  // a caller could not queue one of its commands
    PendingBatch* next = nullptr;  // submission queue link
  };
  struct ScriptState;

  // Reply callbacks (RedisWire::ReplyFn).
  static void OnHandshakeReply(RedisWire* wire, RedisReply* reply, void* privdata);
  static void OnScriptLoaded(RedisWire* wire, RedisReply* reply, void* privdata);
  static void OnCommandReply(RedisWire* wire, RedisReply* reply, void* privdata);
  // RedisWire::Owner.
  void OnSocketReadable(RedisWire* wire) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnSocketWritable(RedisWire* wire) override ABSL_LOCKS_EXCLUDED(mu_);
  bool SocketWatchPaused() const override;
  void OnConnectFailed(RedisWire* wire) override;
  void OnDisconnected(RedisWire* wire) override;
  // Records why `wire` failed (last_error_, whether TLS refused it) and logs it: a lost
  // connection if it was ready, else a failed connect.
  void NoteWireFailure(const RedisWire& wire) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Everything from here on runs on the loop thread under mu_, except TryWriteFromCaller (a
  // caller's thread, which takes mu_ only if it is free) and WriteFromCaller (under it).
  void StartConnect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BecomeReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the wire and frees it, which fails its pending commands; then schedules a reconnect
  // unless closed. No-op without a wire.
  void Drop(std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears wire_ (whoever calls this frees the wire, or it frees itself) and the timers tied to
  // it.
  void ForgetContext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleReconnect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connects at once, the reconnect timer off and the backoff back at its start.
  void ConnectNow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetReady(bool ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStallCheck() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void DrainSubmissions() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `batch` from the calling thread if the connection is idle and the mutex free; false
  // (and `batch` untouched) otherwise.
  bool TryWriteFromCaller(PendingBatch* batch) ABSL_LOCKS_EXCLUDED(mu_);
  bool WriteFromCaller(PendingBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends every piece of work the loop thread does under mu_: takes over the batches callers
  // wrote (timers, stall watch) and renews the write horizon.
  void FinishLoopWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdoptCallerBatches() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWatchdog() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(PendingBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes what DrainSubmissions queued; arms the write event only for what the socket did not
  // take.
  void WriteQueuedFromLoop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes command i of `batch` to the output buffer (the wire flushes it when the socket is
  // writable, together with everything else queued until then).
  bool SendCommand(PendingBatch* batch, size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SendScriptLoad(ScriptState* state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SendHandshakeCommand(std::initializer_list<std::string_view> args, void* tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteCommandSent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Arms the stall timer unless it is armed already (or stall_timeout_us is 0).
  void WatchForStall() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HealNoScript(PendingBatch* batch, size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ScriptState* StateFor(const RedisScript& script) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Complete(PendingBatch* batch, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Complete(batch, OK) but for the callback, which RunAnswered runs once mu_ is released.
  void CompleteAfterRead(PendingBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the callbacks of the batches in `answered` and frees them. REQUIRES: on the loop
  // thread, without mu_; the batches are completed and nothing else refers to them.
  static void RunAnswered(std::vector<PendingBatch*>& answered);
  // Records a batch's end: the breaker, the call latency, its deadline timer.
  void NoteCompleted(PendingBatch* batch, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFree(PendingBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Watches `batch`'s deadline, `remaining_us` from now (> 0): the batch joins the list of
  // watched batches, and the deadline timer is brought forward if this deadline comes first.
  void WatchDeadline(PendingBatch* batch, int64_t remaining_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnwatchDeadline(PendingBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The deadline timer fired: fails every watched batch whose deadline has passed, and sets the
  // timer for the earliest deadline left.
  void ExpireDeadlines() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LostStatus(const RedisWire* wire) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Not a read-modify-write: every Bump runs under mu_, so bumps never race one another; the
  // counters are atomic only for stats() readers on other threads.
  static void Bump(std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  EventLoop& loop_;
  const RedisConnectionOptions options_;
  const Clock& clock_;
  const std::shared_ptr<const ScriptCache> scripts_;
  absl::AnyInvocable<void(bool)> on_ready_change_ ABSL_GUARDED_BY(mu_);
  CircuitBreaker* const breaker_;
  MetricHistogram* const call_latency_;

  // Batches handed over by Submit, waiting for the loop thread.
  MpscQueue<PendingBatch, &PendingBatch::next> submissions_;
  std::atomic<bool> ready_{false};

  // The loop thread holds it for all its work on this connection; a caller only ever
  // TryLocks it, so a caller never waits for the loop.
  Mutex mu_;

  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  // Where to connect (options_' until Retarget), and its "host:port" for messages.
  RedisEndpoint endpoint_ ABSL_GUARDED_BY(mu_);
  std::string address_ ABSL_GUARDED_BY(mu_);
  RedisWire* wire_ ABSL_GUARDED_BY(mu_) = nullptr;
  ExponentialBackoff backoff_ ABSL_GUARDED_BY(mu_);
  // Timers are also armed and cancelled only on the loop thread.
  LoopTimer connect_timer_ ABSL_GUARDED_BY(mu_);
  LoopTimer reconnect_timer_ ABSL_GUARDED_BY(mu_);
  LoopTimer stall_timer_ ABSL_GUARDED_BY(mu_);
  // One timer for every batch's deadline: batches are watched in the order they are written,
  // which is nearly the order of their deadlines (one budget), so the timer is set once per
  // earliest deadline rather than once per batch; it may fire for a batch answered long ago,
  // and then moves on to the earliest deadline still watched.
  LoopTimer deadline_timer_ ABSL_GUARDED_BY(mu_);
  int64_t deadline_timer_at_ ABSL_GUARDED_BY(mu_) = 0;  // clock_ time it is set for; 0: unset
  PendingBatch* deadlines_head_ ABSL_GUARDED_BY(mu_) = nullptr;
  PendingBatch* deadlines_tail_ ABSL_GUARDED_BY(mu_) = nullptr;
  WriteHorizon horizon_ ABSL_GUARDED_BY(mu_);
  // A caller is queueing commands: the socket events keep off the loop.
  bool writing_from_caller_ ABSL_GUARDED_BY(mu_) = false;
  // DrainSubmissions is queueing commands it writes itself right after (WriteQueuedFromLoop).
  bool writing_from_loop_ ABSL_GUARDED_BY(mu_) = false;
  // Written by callers, not yet seen by the loop.
  std::vector<PendingBatch*> caller_batches_ ABSL_GUARDED_BY(mu_);
  // AdoptCallerBatches' scratch, kept for its capacity.
  std::vector<PendingBatch*> adopting_ ABSL_GUARDED_BY(mu_);
  // Batches answered OK by the read OnSocketReadable makes (the only place the wire hands out
  // replies), whose callbacks it runs after releasing mu_ (from `answering_`, the loop thread's
  // alone, swapped with this one for its capacity).
  std::vector<PendingBatch*> answered_ ABSL_GUARDED_BY(mu_);
  std::vector<PendingBatch*> answering_;
  // Why the last connect failed or the connection went away, and whether it was TLS.
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  bool last_error_tls_ ABSL_GUARDED_BY(mu_) = false;
  // The TLS failure logged last: each new cause is logged once (then at most every minute).
  std::string tls_error_logged_ ABSL_GUARDED_BY(mu_);
  // Why Drop freed the wire, for the batches it fails.
  std::string drop_reason_ ABSL_GUARDED_BY(mu_);
  uint64_t sent_seq_ ABSL_GUARDED_BY(mu_) = 0;    // commands written so far, over all wires
  size_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;   // commands written whose callback has not run
  uint64_t replies_seen_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t replies_at_stall_check_ ABSL_GUARDED_BY(mu_) = 0;
  // By RedisScript::id().
  std::vector<std::unique_ptr<ScriptState>> script_states_ ABSL_GUARDED_BY(mu_);

  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> disconnects_{0};
  std::atomic<uint64_t> script_loads_{0};
  std::atomic<uint64_t> noscript_retries_{0};
  std::atomic<uint64_t> deadline_exceeded_{0};
  std::atomic<uint64_t> late_replies_{0};
  std::atomic<uint64_t> caller_writes_{0};
  std::atomic<uint64_t> tls_failures_{0};
};

}  // namespace sluice
