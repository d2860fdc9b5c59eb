// One hiredis async connection to one Redis server, owned by one EventLoop. It connects
// (AUTH, SELECT, SCRIPT LOAD of every registered script, PING), pipelines the batches handed to
// it, completes each batch when its last reply arrives or its deadline passes, heals NOSCRIPT,
// and reconnects with jittered exponential backoff after any failure.
//
// hiredis 0.14 has no timeouts, so they are this class's own timers: connect timeout, a
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
// Threading: Submit and ready() may be called from any thread. Everything else, and every
// callback this class makes (batch callbacks, the readiness hook), runs on the loop thread.
// Everything the loop thread does here runs under `mu_`, so the hiredis context and the
// counters below are shared only under it; callbacks run with it held, and may Submit (to this
// connection too: from the loop thread, Submit always queues). Destroy the connection on the
// loop thread, or after the loop has stopped.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "server/common/clock.h"
#include "server/redis/backoff.h"
#include "server/redis/command_batch.h"
#include "server/redis/event_loop.h"
#include "server/redis/mpsc_queue.h"
#include "server/redis/script_cache.h"

struct event;
struct redisAsyncContext;

namespace sluice {

struct RedisConnectionOptions {
  std::string host{};  // an IP literal or a name resolved (blocking) at each connect
  int port = 6379;
  // Not empty: connect to this unix domain socket instead of host:port.
  std::string unix_path{};
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

  // Field by field, for totals over several connections.
  RedisConnectionStats& operator+=(const RedisConnectionStats& other) {
    connects += other.connects;
    disconnects += other.disconnects;
    script_loads += other.script_loads;
    noscript_retries += other.noscript_retries;
    deadline_exceeded += other.deadline_exceeded;
    late_replies += other.late_replies;
    caller_writes += other.caller_writes;
    return *this;
  }
};

class RedisConnection {
 public:
  enum class State { kIdle, kConnecting, kReady, kDown, kClosed };

  // `loop`, `clock` and everything `scripts` hands out must outlive the connection.
  // `on_ready_change(ready)` runs on the loop thread whenever readiness flips.
  RedisConnection(EventLoop& loop, RedisConnectionOptions options, const Clock& clock,
                  std::shared_ptr<const ScriptCache> scripts, RandomFn random,
                  absl::AnyInvocable<void(bool ready)> on_ready_change);
  // Close()s. REQUIRES: on the loop thread, or the loop is not running.
  ~RedisConnection();

  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Starts connecting. REQUIRES: on the loop thread; once.
  void Start();

  // Hands a batch to the connection; any thread, never blocks. `done` runs exactly once on the
  // loop thread: with the replies, or kUnavailable at once if the connection is not ready,
  // kDeadlineExceeded at `deadline_us` (Clock::MonotonicMicros), kUnavailable if the
  // connection is lost first. Only if the connection is closed does `done` run inline, on the
  // caller's stack, with kUnavailable.
  void Submit(CommandBatch batch, int64_t deadline_us, BatchCallback done);

  // Stops for good: timers off, the hiredis context freed, every pending or queued batch failed
  // with kUnavailable; later Submits fail inline. Idempotent.
  // REQUIRES: on the loop thread, or the loop is not running.
  void Close();

  // Whether the handshake is done and the connection not known to be lost. Any thread; a hint
  // that may be stale by the time the caller acts on it.
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  RedisConnectionStats stats() const;
  EventLoop& loop() const { return loop_; }
  const std::string& address() const { return address_; }

 private:
  struct PendingBatch;
  // What hiredis holds (as privdata) for one command on the wire.
  struct CommandSlot {
    PendingBatch* batch = nullptr;
    uint64_t sent_seq = 0;  // when it was (last) written, in sent_seq_ terms
    int noscript_retries = 0;
  };
  // A batch from Submit until it has completed and hiredis holds none of its slots any more;
  // so it outlives its deadline while late replies are still due.
  struct PendingBatch {
    RedisConnection* owner = nullptr;
    CommandBatch commands;
    BatchCallback done;
    int64_t deadline_us = 0;
    std::vector<RedisReply> replies;
    std::unique_ptr<CommandSlot[]> slots;
    event* timer = nullptr;
    size_t remaining = 0;  // replies still missing
    size_t refs = 0;       // slots hiredis still holds
    bool completed = false;
    // Written by a caller and not yet seen by the loop: in caller_batches_, without a timer.
    bool awaiting_loop = false;
    bool send_failed = false;  // a caller could not queue one of its commands
    PendingBatch* next = nullptr;  // submission queue link
  };
  struct ScriptState;
  // What hiredis holds (ac->ev.data) to watch the socket on the loop: our own adapter rather
  // than hiredis' libevent one, so that the socket is read and written under `mu_`, and so that
  // a caller queueing commands does not touch the loop's event_base.
  struct SocketEvents {
    RedisConnection* owner = nullptr;
    redisAsyncContext* ac = nullptr;
    event* read = nullptr;
    event* write = nullptr;
  };

  // hiredis and libevent callbacks.
  static void OnConnect(const redisAsyncContext* ac, int status);
  static void OnDisconnect(const redisAsyncContext* ac, int status);
  static void OnHandshakeReply(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnScriptLoaded(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnCommandReply(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnBatchDeadline(int fd, short events, void* arg);
  static void OnReadable(int fd, short events, void* arg);
  static void OnWritable(int fd, short events, void* arg);
  // hiredis' hooks to arm or disarm reading or writing.
  static void Watch(void* privdata, bool read, bool arm);
  static void CleanupEvents(void* privdata);
  void AttachToLoop(redisAsyncContext* ac);

  void StartConnect();
  void BecomeReady();
  // Forgets the hiredis context and frees it, which fails its pending commands; then schedules
  // a reconnect unless closed. No-op without a context.
  void Drop(std::string reason);
  // Clears ac_ (whoever calls this frees the context, or hiredis does) and the timers tied to it.
  void ForgetContext();
  void ScheduleReconnect();
  void SetReady(bool ready);
  void OnStallCheck();

  void DrainSubmissions();
  // Writes `batch` from the calling thread if the connection is idle and the mutex free; false
  // (and `batch` untouched) otherwise.
  bool TryWriteFromCaller(PendingBatch* batch);
  // Ends every piece of work the loop thread does under mu_: takes over the batches callers
  // wrote (timers, stall watch) and moves the horizon.
  void FinishLoopWork();
  void AdoptCallerBatches();
  void OnWatchdog();
  void Dispatch(PendingBatch* batch);
  // Writes command i of `batch` to the output buffer (hiredis flushes it when the socket is
  // writable, together with everything else queued until then).
  bool SendCommand(PendingBatch* batch, size_t i);
  bool SendScriptLoad(ScriptState* state);
  bool SendHandshakeCommand(std::initializer_list<std::string_view> args, void* tag);
  void NoteCommandSent();
  // Arms the stall timer unless it is armed already (or stall_timeout_us is 0).
  void WatchForStall();
  void HealNoScript(PendingBatch* batch, size_t i);
  ScriptState* StateFor(const RedisScript& script);
  void Complete(PendingBatch* batch, absl::Status status);
  void MaybeFree(PendingBatch* batch);
  // Gives `batch` its deadline timer, `remaining_us` from now (> 0).
  void ArmDeadline(PendingBatch* batch, int64_t remaining_us);
  event* AcquireTimer(PendingBatch* batch);
  void ReleaseTimer(event* timer);
  absl::Status LostStatus(const redisAsyncContext* ac) const;
  // Not a read-modify-write: every Bump runs under mu_, so bumps never race one another; the
  // counters are atomic only for stats() readers on other threads.
  static void Bump(std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  EventLoop& loop_;
  const RedisConnectionOptions options_;
  const std::string address_;  // "host:port", for messages
  const Clock& clock_;
  const std::shared_ptr<const ScriptCache> scripts_;
  absl::AnyInvocable<void(bool)> on_ready_change_;

  // Batches handed over by Submit, waiting for the loop thread.
  MpscQueue<PendingBatch, &PendingBatch::next> submissions_;
  std::atomic<bool> ready_{false};

  // Not absl::Mutex: see the note in event_loop.h. The loop thread holds it for all its work on
  // this connection; a caller only ever try_locks it, so a caller never waits for the loop.
  std::mutex mu_;

  // Everything below is touched under mu_, and the timers only on the loop thread.
  State state_ = State::kIdle;
  redisAsyncContext* ac_ = nullptr;
  ExponentialBackoff backoff_;
  LoopTimer connect_timer_;
  LoopTimer reconnect_timer_;
  LoopTimer stall_timer_;
  LoopTimer watchdog_;  // runs the loop by horizon_us_ while callers write
  // Callers may write a batch whose deadline is at or after this (clock_ time); 0: none may.
  int64_t horizon_us_ = 0;
  bool writing_from_caller_ = false;  // a caller is queueing commands: the adapter keeps off the loop
  bool caller_wrote_ = false;         // since the loop last ran
  std::vector<PendingBatch*> caller_batches_;  // written by callers, not yet seen by the loop
  std::vector<PendingBatch*> adopting_;        // AdoptCallerBatches' scratch, kept for its capacity
  std::string last_error_;   // why the last connect failed or the connection went away
  std::string drop_reason_;  // why Drop freed the context, for the batches it fails
  uint64_t sent_seq_ = 0;    // commands written so far, over all contexts
  size_t outstanding_ = 0;   // commands written whose callback has not run yet
  uint64_t replies_seen_ = 0;
  uint64_t replies_at_stall_check_ = 0;
  std::vector<std::unique_ptr<ScriptState>> script_states_;  // by RedisScript::id()
  std::vector<event*> free_timers_;  // deadline timers for reuse: no allocation per batch

  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> disconnects_{0};
  std::atomic<uint64_t> script_loads_{0};
  std::atomic<uint64_t> noscript_retries_{0};
  std::atomic<uint64_t> deadline_exceeded_{0};
  std::atomic<uint64_t> late_replies_{0};
  std::atomic<uint64_t> caller_writes_{0};
};

}  // namespace sluice
